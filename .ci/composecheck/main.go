// Command composecheck loads docker-compose.yml with compose-go, the loader
// `docker compose config` uses (schema validation, interpolation, profiles,
// merge keys), as .ci/run's check where no Docker engine runs. It is its own
// module so the loader's dependencies stay out of kmirror's.
//
//	go run . ../../docker-compose.yml
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

func load(file string, env, profiles []string) (*types.Project, error) {
	opts, err := cli.NewProjectOptions([]string{file}, cli.WithEnv(env), cli.WithProfiles(profiles), cli.WithName("kmirror"))
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: composecheck docker-compose.yml")
		os.Exit(2)
	}
	file := os.Args[1]
	var problems []string
	token := []string{"KMIRROR_API_TOKEN=check"}
	for _, profiles := range [][]string{nil, {"demo"}} {
		p, err := load(file, token, profiles)
		if err != nil {
			problems = append(problems, fmt.Sprintf("profiles %v: %v", profiles, err))
			continue
		}
		names := p.ServiceNames()
		slices.Sort(names)
		fmt.Printf("profiles %v: services %s\n", profiles, strings.Join(names, ", "))
		for _, name := range names {
			s := p.Services[name]
			if s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 {
				problems = append(problems, name+": no health check")
			}
			for _, port := range s.Ports {
				if port.HostIP != "127.0.0.1" {
					problems = append(problems, fmt.Sprintf("%s: port %s published beyond loopback", name, port.Published))
				}
			}
		}
	}
	// The token is required: without it the file does not load.
	if _, err := load(file, nil, nil); err == nil || !strings.Contains(err.Error(), "KMIRROR_API_TOKEN") {
		problems = append(problems, fmt.Sprintf("loads without KMIRROR_API_TOKEN (%v)", err))
	}
	if len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "composecheck:\n  "+strings.Join(problems, "\n  "))
		os.Exit(1)
	}
	fmt.Println("composecheck: ok")
}
