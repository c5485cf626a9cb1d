module k8sxetcd

go 1.26.0
