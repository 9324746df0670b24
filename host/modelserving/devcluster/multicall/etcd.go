// etcd, as go.etcd.io/etcd/server/v3's main package runs it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func init() {
	register("etcd", func() int {
		etcdmain.Main(os.Args)
		return 0
	})
}
