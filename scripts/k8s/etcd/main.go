// etcd for the single-node test cluster: `go install go.etcd.io/etcd/server/v3@...`
// is refused (its go.mod has replace directives), so this module builds it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
