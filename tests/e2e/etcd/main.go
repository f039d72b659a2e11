// Command etcd is the upstream etcd server, built from Go modules
// (`go install` of etcd itself fails because of its replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
