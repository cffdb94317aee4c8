package main

import (
	"k8s.io/apiserver/pkg/authentication/user"
	coreapi "k8s.io/kubernetes/pkg/apis/core"
)

// The local plane's kube-controller-manager runs with --use-service-account-credentials=false
// as system:kube-controller-manager in system:masters (tests/controlplane/cmd/kcp/pki.go); on
// OpenShift it runs with service account credentials, so the pods of a Deployment, StatefulSet,
// Job or DaemonSet are created by that controller's service account in kube-system, which
// holds no SCC grant beyond system:authenticated's. This maps the one identity to the other
// (played: it is the identity OpenShift's admission would see), chosen by the pod's owner.
const controllerManager = "system:kube-controller-manager"

var controllerOf = map[string]string{
	"ReplicaSet":            "replicaset-controller",
	"StatefulSet":           "statefulset-controller",
	"Job":                   "job-controller",
	"DaemonSet":             "daemon-set-controller",
	"ReplicationController": "replication-controller",
}

func asOpenShiftSees(who *user.DefaultInfo, pod *coreapi.Pod) *user.DefaultInfo {
	if who.Name != controllerManager || pod == nil {
		return who
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		if sa, ok := controllerOf[ref.Kind]; ok {
			return &user.DefaultInfo{
				Name:   "system:serviceaccount:kube-system:" + sa,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
			}
		}
	}
	return who
}
