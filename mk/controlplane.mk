# Local control plane (kube-apiserver + kube-controller-manager + etcd + upstream CRDs).
# Owned by the control-plane work; placeholder targets until it lands.
.PHONY: controlplane cluster-up cluster-down
controlplane: setup
	@echo "controlplane: not built yet"
cluster-up: controlplane
	@echo "cluster-up: not available yet" >&2; exit 1
cluster-down:
	@true
