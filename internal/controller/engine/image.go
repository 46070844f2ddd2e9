package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/distribution/reference"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The module image: its reference is checked before any Job starts, the
// digest it resolved to is pinned after a successful apply (spec 004), and
// a Job whose image cannot be pulled is reported instead of waited on
// silently.

// checkImage refuses a reference a kubelet could never pull, with the
// parser's reason.
func checkImage(ref string) error {
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return fmt.Errorf("%w: image %q: %w", errInputs, ref, err)
	}
	return nil
}

// jobImage is the image a Job of op runs: the reference the durable inputs
// recorded for a restore, the object's own otherwise, pinned to the digest
// of the last successful apply while the reference has not changed. (A
// destroy or a drift check runs the image of the last successful apply:
// appliedRun.)
func (r *Reconciler) jobImage(ctx context.Context, obj Object, op infrav1.Operation) (string, error) {
	var s corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: InputsName(r.kind().Short(), obj.GetName())}, &s)
	if apierrors.IsNotFound(err) {
		return obj.GetRunnerSpec().Image, nil
	}
	if err != nil {
		return "", fmt.Errorf("durable inputs: %w", err)
	}
	image := obj.GetRunnerSpec().Image
	if recorded := s.Annotations[infrav1.AnnotationImage]; op == infrav1.OperationRestore && recorded != "" {
		image = recorded
	}
	if s.Annotations[infrav1.AnnotationImage] != image {
		return image, nil
	}
	return Pin(image, s.Annotations[infrav1.AnnotationImageDigest]), nil
}

// Pin adds digest to image unless the reference already names one.
func Pin(image, digest string) string {
	if digest == "" {
		return image
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	if _, ok := named.(reference.Digested); ok {
		return image
	}
	return image + "@" + digest
}

// resolvedDigest is the digest a pod's runner container ran, from the
// imageID the kubelet reports ("repo@sha256:…"); "" when it reports none
// or only a local image ID, which no registry could serve.
func resolvedDigest(pod *corev1.Pod) string {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name != containerName {
			continue
		}
		_, digest, ok := strings.Cut(st.ImageID, "@")
		if ok && strings.HasPrefix(digest, "sha256:") && len(digest) == len("sha256:")+64 {
			return digest
		}
	}
	return ""
}

// pinDigest pins, in s (the durable inputs Secret), the digest a
// successful apply of job ran, unless the image reference changed
// meanwhile (a new reference clears the pin).
func pinDigest(s *corev1.Secret, job *batchv1.Job, digest string) {
	image := JobContainer(job).Image
	if base, _, pinned := strings.Cut(image, "@"); pinned {
		image = base
	}
	if digest == "" || s.Annotations[infrav1.AnnotationImage] != image {
		return
	}
	s.Annotations[infrav1.AnnotationImageDigest] = digest
}

func JobContainer(job *batchv1.Job) *corev1.Container {
	for i, c := range job.Spec.Template.Spec.Containers {
		if c.Name == containerName {
			return &job.Spec.Template.Spec.Containers[i]
		}
	}
	return &corev1.Container{}
}

// pullReasons are the kubelet's waiting reasons of a container whose image
// it cannot get; it retries them forever, so the Job would only end at its
// deadline.
var pullReasons = sets.New("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")

// pullFailure describes why a pod of the Job cannot pull an image, or "".
func pullFailure(pods []corev1.Pod) string {
	for _, p := range pods {
		for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if w := st.State.Waiting; w != nil && pullReasons.Has(w.Reason) {
				msg := fmt.Sprintf("container %s cannot pull image %s (%s)", st.Name, st.Image, w.Reason)
				if w.Message != "" {
					msg += ": " + w.Message
				}
				return msg
			}
		}
	}
	return ""
}
