// Copyright: inference.blueprints contributors
// GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

// Command eppcheck asks the llm-d router's own start-up code whether it loads a scheduler
// (EndpointPickerConfig) config: it runs the EPP runner's setup (cmd/epp/runner
// NewTestRunnerSetup: the same setup() the epp binary runs in pool mode, i.e. feature gates, plugin
// registration, strict decoding, plugin factories, profile and flow-control validation, default
// producers, the data-layer DAG, the data layer and admission control) with the config file and a
// pool name, parsed by the epp binary's own flags. The API server of $KUBECONFIG answers the
// discovery the controller manager does on construction; the manager is never started, so no
// object is read or written. It prints one JSON line {"loaded": bool, "error": "..."} and exits 0
// when the router loads the config, 1 when it refuses it, 2 on a usage error.
//
// Usage: KUBECONFIG=... eppcheck CONFIG_FILE
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/llm-d/llm-d-router/cmd/epp/runner"
	runserver "github.com/llm-d/llm-d-router/pkg/epp/server"
)

type result struct {
	Loaded bool   `json:"loaded"`
	Error  string `json:"error,omitempty"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: eppcheck CONFIG_FILE")
		os.Exit(2)
	}
	if _, err := os.Stat(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// The router's own log lines (deprecations, defaults it adds) go to stderr.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))

	// The epp binary's own flags, parsed as it parses them (pool mode, as KServe starts it).
	opts := runserver.NewOptions()
	fs := pflag.NewFlagSet("epp", pflag.ContinueOnError)
	opts.AddFlags(fs)
	args := []string{"--pool-name=eppcheck-pool", "--pool-namespace=eppcheck", "--config-file=" + os.Args[1]}
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := opts.Complete(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.Timeout = 10 * time.Second
	_, _, _, err = runner.NewTestRunnerSetup(ctx, cfg, opts, nil)
	out := result{Loaded: err == nil}
	if err != nil {
		out.Error = err.Error()
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
	if err != nil {
		os.Exit(1)
	}
}
