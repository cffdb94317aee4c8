"""Data-plane tests: requests through the real llm-d router (docs/dataplane.md)."""

import os

# The tests start engines (subprocess with a prctl preexec, i.e. fork) while the gateway's gRPC
# channel is busy; gRPC's fork handlers then abort the child ("skipping fork() handlers", SIGABRT
# before exec). The child only runs prctl and exec, so it needs none: switch them off before grpc is
# imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
