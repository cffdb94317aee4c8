// Command argocd runs the two Argo CD components the GitOps tests need, the application controller
// and the repo server, from github.com/argoproj/argo-cd/v3 as published. Like Argo CD's own
// multi-call binary it picks the component from its name (argv[0]) or ARGOCD_BINARY_NAME; unlike it,
// it links neither the API server (and its UI assets) nor the CLI, which the tests do not run.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
)

func command(name string) *cobra.Command {
	switch name {
	case "argocd-application-controller":
		return appcontroller.NewCommand()
	case "argocd-repo-server":
		return reposerver.NewCommand()
	}
	return nil
}

func main() {
	name := filepath.Base(os.Args[0])
	if env := os.Getenv("ARGOCD_BINARY_NAME"); env != "" {
		name = env
	}
	cmd := command(name)
	if cmd == nil {
		fmt.Fprintf(os.Stderr, "argocd: %q is not a component this build runs "+
			"(argocd-application-controller, argocd-repo-server)\n", name)
		os.Exit(2)
	}
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
