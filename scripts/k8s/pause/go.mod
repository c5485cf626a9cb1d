module k8sxpause

go 1.26.0
