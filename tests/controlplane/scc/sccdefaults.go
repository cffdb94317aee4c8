package main

import (
	"encoding/json"
	"io"
	"net/http"

	securityv1 "github.com/openshift/api/security/v1"
	"github.com/openshift/apiserver-library-go/pkg/securitycontextconstraints/sccdefaults"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
)

// serveDefaults defaults SecurityContextConstraints as OpenShift's
// security.openshift.io/DefaultSecurityContextConstraints admission does (sccdefaults.SetDefaults_SCC):
// the CRD's schema requires the fields an SCC manifest may leave out.
func serveDefaults(w http.ResponseWriter, r *http.Request) {
	in := admissionv1.AdmissionReview{}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil || in.Request == nil {
		http.Error(w, "bad AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: true}
	scc := &securityv1.SecurityContextConstraints{}
	if err := json.Unmarshal(in.Request.Object.Raw, scc); err == nil {
		sccdefaults.SetDefaults_SCC(scc)
		if out, err := json.Marshal(scc); err == nil {
			if ops, err := jsonpatch.CreatePatch(in.Request.Object.Raw, out); err == nil && len(ops) > 0 {
				resp.Patch, _ = json.Marshal(ops)
				pt := admissionv1.PatchTypeJSONPatch
				resp.PatchType = &pt
			}
		}
	}
	in.Response, in.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(in)
}
