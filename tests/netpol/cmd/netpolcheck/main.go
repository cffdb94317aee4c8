// netpolcheck evaluates traffic paths against NetworkPolicies with cyclonus's policy matcher
// (github.com/mattfenwick/cyclonus/pkg/matcher, used by version from the module proxy): the same
// engine its `analyze` command uses to say whether a flow is allowed. Nothing of cyclonus is copied.
//
// stdin: {"policies": [NetworkPolicy...], "flows": [{"name", "source", "destination", "port",
// "portName", "protocol"}]}, each peer either {"namespace", "namespaceLabels", "podLabels"} (a pod
// in the cluster) or {"ip"} (outside it). stdout: [{"name", "allowed", "ingress", "egress",
// "explanation"}], one per flow, in order.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

type peer struct {
	Namespace       string            `json:"namespace"`
	NamespaceLabels map[string]string `json:"namespaceLabels"`
	PodLabels       map[string]string `json:"podLabels"`
	IP              string            `json:"ip"`
}

type flow struct {
	Name        string `json:"name"`
	Source      peer   `json:"source"`
	Destination peer   `json:"destination"`
	Port        int    `json:"port"`
	PortName    string `json:"portName"`
	Protocol    string `json:"protocol"`
}

type input struct {
	Policies []*networkingv1.NetworkPolicy `json:"policies"`
	Flows    []flow                        `json:"flows"`
}

type verdict struct {
	Name        string `json:"name"`
	Allowed     bool   `json:"allowed"`
	Ingress     bool   `json:"ingress"`
	Egress      bool   `json:"egress"`
	Explanation string `json:"explanation"`
}

func trafficPeer(p peer) *matcher.TrafficPeer {
	if p.Namespace == "" {
		return &matcher.TrafficPeer{IP: p.IP}
	}
	return &matcher.TrafficPeer{IP: p.IP, Internal: &matcher.InternalPeer{
		Namespace: p.Namespace, NamespaceLabels: p.NamespaceLabels, PodLabels: p.PodLabels,
	}}
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "netpolcheck: reading the input: %v\n", err)
		os.Exit(2)
	}
	policy := matcher.BuildNetworkPolicies(true, in.Policies)
	out := make([]verdict, 0, len(in.Flows))
	for _, f := range in.Flows {
		protocol := v1.Protocol(f.Protocol)
		if protocol == "" {
			protocol = v1.ProtocolTCP
		}
		result := policy.IsTrafficAllowed(&matcher.Traffic{
			Source: trafficPeer(f.Source), Destination: trafficPeer(f.Destination),
			ResolvedPort: f.Port, ResolvedPortName: f.PortName, Protocol: protocol,
		})
		out = append(out, verdict{
			Name: f.Name, Allowed: result.IsAllowed(), Ingress: result.Ingress.IsAllowed(),
			Egress: result.Egress.IsAllowed(), Explanation: result.Table(),
		})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		os.Exit(2)
	}
}
