// A multi-call binary: each program of a devcluster bundle (etcd, kube-apiserver, kwok, ...) is
// a symlink to it, and it runs the program named by the name it is started as (argv[0]).
//
// modelserving.devcluster.build copies this file and one file per component of the bundle
// (etcd.go, kubernetes.go, kwok.go) into the wrapper module it compiles; each of those files
// registers its programs, each doing what that program's own main package does.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// programs maps a program name to its main function, which returns the exit code.
var programs = map[string]func() int{}

func register(name string, run func() int) {
	if _, taken := programs[name]; taken {
		panic("program registered twice: " + name)
	}
	programs[name] = run
}

func main() {
	name := filepath.Base(os.Args[0])
	run, found := programs[name]
	if !found {
		names := make([]string, 0, len(programs))
		for known := range programs {
			names = append(names, known)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "%s: start me by one of these names (a symlink): %v\n", name, names)
		os.Exit(2)
	}
	os.Exit(run())
}
