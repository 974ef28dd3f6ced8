// etcd as Kubernetes pins it (go.etcd.io/etcd/server/v3 at the version of k8s.io/apiserver's go.mod).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
