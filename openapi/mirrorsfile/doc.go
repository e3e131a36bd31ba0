// Package mirrorsfile is mirrors as code: a YAML file that lists mirrors
// (their source, config and topics), and the plan and apply that make a
// kmirror deployment match it, through the public REST API only (the
// generated client in kmirror/openapi/client). It is what `kmirror apply`
// and `kmirror export` run, and what a CI job in Go can call itself:
//
//	f, err := mirrorsfile.Load("mirrors.yaml")
//	plan, err := mirrorsfile.NewPlan(ctx, api, f, mirrorsfile.Opts{})
//	plan.Write(os.Stdout, "mirrors.yaml")
//	_, err = mirrorsfile.Apply(ctx, api, plan, mirrorsfile.ApplyOpts{})
//
// It imports the generated client and nothing of the server's: what it
// cannot learn from the API, it does not know. docs/mirrors-as-code.md is
// the format's reference.
package mirrorsfile
