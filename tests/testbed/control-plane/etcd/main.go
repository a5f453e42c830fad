// Command etcd is etcd's server main at the version pinned in go.mod (`go install` cannot build
// etcd's own main module, whose go.mod has replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
