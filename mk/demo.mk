# make demo: start the local control plane (profile h100-8x2-rdma unless PROFILE is given),
# converge the example chat site on it (plan -> platform -> serving -> verify), and show the
# plan, what was created (the apply_summary callback) and where the sizing report is.
# The local control plane has no Gateway controller, so the Gateway wait is skipped.
.PHONY: demo
DEMO_SITE   ?= example-chat
DEMO_REPORT := $(ROOT)/reports

demo: setup cluster-up
	K8S_AUTH_KUBECONFIG=$(CLUSTER_DIR)/kubeconfig \
	  ansible-playbook -i inventories/$(DEMO_SITE) playbooks/site.yml -e report_dir=$(DEMO_REPORT)
	@echo
	@echo "Plan summary (from the report):"
	@sed -n '1,40p' $(DEMO_REPORT)/$(DEMO_SITE)/report.md
	@echo
	@echo "Sizing report: $(DEMO_REPORT)/$(DEMO_SITE)/report.md"
	@echo "Cluster: export KUBECONFIG=$(CLUSTER_DIR)/kubeconfig; $(CACHE)/bin/kubectl get llminferenceservices,inferencepools -A"
	@echo "Stop it with: make cluster-down"
