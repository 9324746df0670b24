// Package v1alpha1 lays out the part of Kthena's workload.serving.volcano.sh/v1alpha1 API that
// its revision hashes cover: a Role and the types below it.
//
// Kthena hashes a go-spew rendering of these Go values, and that rendering names every type and
// field, so the package name (v1alpha1), the type names, the field names, their order, their Go
// types and their json tags are what matter here. They are stated as Kthena declares them at
// commit 3cc0572 (pkg/apis/workload/v1alpha1/servinggroup_types.go and model_serving_types.go);
// the Kubernetes types come from k8s.io/api at the version Kthena pins. Nothing else of Kthena's
// is needed, so this tool builds from the Go module proxy's Kubernetes modules alone.
package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Role is one role of a ServingGroup template.
type Role struct {
	Name                       string           `json:"name"`
	Replicas                   *int32           `json:"replicas,omitempty"`
	EntryTemplate              PodTemplateSpec  `json:"entryTemplate"`
	WorkerReplicas             int32            `json:"workerReplicas"`
	WorkerTemplate             *PodTemplateSpec `json:"workerTemplate,omitempty"`
	RollingUpdateConfiguration `json:",inline,omitempty"`
}

// PodTemplateSpec is a role's Pod template: labels and annotations plus a core/v1 PodSpec.
type PodTemplateSpec struct {
	Metadata *Metadata      `json:"metadata,omitempty"`
	Spec     corev1.PodSpec `json:"spec,omitempty"`
}

// Metadata holds the labels and annotations a template adds to its Pods.
type Metadata struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RollingUpdateConfiguration is embedded in Role (RoleRollingUpdate knobs); the hashes clear it.
type RollingUpdateConfiguration struct {
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	Partition      *intstr.IntOrString `json:"partition,omitempty"`
}

// DeepCopy copies a Role the way Kthena's generated deep copy does: maps and slices are new
// (nil stays nil, empty stays empty) and the PodSpecs are copied by k8s.io/api's DeepCopyInto,
// which also copies each resource.Quantity's big number.
func (r *Role) DeepCopy() *Role {
	out := *r
	if r.Replicas != nil {
		v := *r.Replicas
		out.Replicas = &v
	}
	r.EntryTemplate.deepCopyInto(&out.EntryTemplate)
	if r.WorkerTemplate != nil {
		out.WorkerTemplate = new(PodTemplateSpec)
		r.WorkerTemplate.deepCopyInto(out.WorkerTemplate)
	}
	if r.MaxUnavailable != nil {
		v := *r.MaxUnavailable
		out.MaxUnavailable = &v
	}
	if r.Partition != nil {
		v := *r.Partition
		out.Partition = &v
	}
	return &out
}

func (t *PodTemplateSpec) deepCopyInto(out *PodTemplateSpec) {
	*out = *t
	if t.Metadata != nil {
		out.Metadata = &Metadata{Labels: copyMap(t.Metadata.Labels), Annotations: copyMap(t.Metadata.Annotations)}
	}
	t.Spec.DeepCopyInto(&out.Spec)
}

func copyMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}
