// Command kthena-revision computes what Kthena computes for a ModelServing's Pods: the
// `modelserving.volcano.sh/revision` of its roles and each role's
// `modelserving.volcano.sh/role-template-hash`, with Kthena's own rule (go-spew's rendering
// through k8s.io/apimachinery/pkg/util/dump.ForHash, FNV-1 32, rand.SafeEncodeString) on Go
// values decoded as Kthena's informer decodes them, after the API server's CRD pruning and
// defaulting. The Python controller (modelserving.workload.revision) reproduces the rendering
// from a schema of the Go types, and this tool is where both the schema and the expected values
// come from. It is a build-time tool: nothing at run time needs Go.
//
//	kthena-revision schema
//	    print the layout of v1alpha1.Role and every type below it (Go type names as spew prints
//	    them, kinds, fields in declaration order with their JSON names) as JSON; committed as
//	    host/modelserving/data/kthena-role-types.json
//	kthena-revision vectors -crd CRD.yaml [-dump DIR] CASES.yaml...
//	    for every ModelServing in the case files: prune and default it with CRD.yaml's schema
//	    as the API server does, decode its roles, and print the revision and role hashes as
//	    JSON (with the manifest as sent and the roles as defaulted); -dump writes the rendered
//	    text that was hashed, one file per hash, for diffing against the Python rendering
//
// The Role layout in ./v1alpha1 is checked against Kthena's own package by building this tool
// with the v1alpha1 import pointing at a copy of Kthena's source (a go.mod replace of
// github.com/volcano-sh/kthena): `schema` must print the committed file unchanged, and Kthena's
// utils.ModelServingRevision and utils.CalRoleTemplateHash must give every vector. Both held at
// commit 3cc0572 (66 vectors).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "schema":
		err = runSchema(os.Stdout)
	case "vectors":
		err = runVectors(os.Args[2:], os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kthena-revision:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kthena-revision schema | vectors -crd CRD.yaml [-dump DIR] CASES.yaml...")
	os.Exit(2)
}
