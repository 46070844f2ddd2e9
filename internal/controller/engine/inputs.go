package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
)

// errInputs marks inputs that cannot be rendered: a missing source, a key
// that is not there. The object says why in a condition.
var errInputs = errors.New("inputs")

// renderWith renders obj's root module from its variables and sources and
// the kind's own variables, own, which no variable of the spec may set.
func (r *Reconciler) renderWith(ctx context.Context, obj Object, key []byte, own map[string]render.Variable) (*render.Root, error) {
	vars := map[string]render.Variable{}
	for _, src := range obj.GetRunnerSpec().VariablesFrom {
		if err := r.variablesFrom(ctx, obj.GetNamespace(), src, vars); err != nil {
			return nil, err
		}
	}
	for _, v := range obj.GetRunnerSpec().Variables {
		switch {
		case v.Value != nil:
			vars[v.Name] = render.Variable{Value: v.Value.Raw}
		case v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil:
			ref := v.ValueFrom.SecretKeyRef
			var s corev1.Secret
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, &s); err != nil {
				return nil, fmt.Errorf("%w: variable %s: Secret %s: %w", errInputs, v.Name, ref.Name, err)
			}
			b, ok := s.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("%w: variable %s: Secret %s has no key %s", errInputs, v.Name, ref.Name, ref.Key)
			}
			vars[v.Name] = render.Variable{Value: asJSON(b), Sensitive: true}
		case v.ValueFrom != nil && v.ValueFrom.ConfigMapKeyRef != nil:
			ref := v.ValueFrom.ConfigMapKeyRef
			var cm corev1.ConfigMap
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, &cm); err != nil {
				return nil, fmt.Errorf("%w: variable %s: ConfigMap %s: %w", errInputs, v.Name, ref.Name, err)
			}
			val, ok := cm.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("%w: variable %s: ConfigMap %s has no key %s", errInputs, v.Name, ref.Name, ref.Key)
			}
			vars[v.Name] = render.Variable{Value: asJSON([]byte(val))}
		}
	}
	for name, v := range own {
		if _, set := vars[name]; set {
			return nil, fmt.Errorf("%w: variable %s is set by the manager for a %s; the spec may not set it", errInputs, name, r.kind().Name())
		}
		vars[name] = v
	}
	replace, err := r.kind().Replace(ctx, r.Client, obj)
	if err != nil {
		return nil, err
	}
	root, err := render.Render(key, render.Request{
		StateSuffix: StateSuffix(r.kind().Short(), obj.GetName()), Namespace: obj.GetNamespace(),
		Variables: vars, Image: obj.GetRunnerSpec().Image, Identity: identity(obj), Replace: replace,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInputs, err)
	}
	return root, nil
}

// variablesFrom adds every key of the selected ConfigMaps or Secrets.
func (r *Reconciler) variablesFrom(ctx context.Context, ns string, src infrav1.VariablesSource, vars map[string]render.Variable) error {
	sel, err := metav1.LabelSelectorAsSelector(&src.Selector)
	if err != nil {
		return fmt.Errorf("%w: variablesFrom: %w", errInputs, err)
	}
	if src.Kind == "Secret" {
		var list corev1.SecretList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return err
		}
		for _, s := range list.Items {
			for k, b := range s.Data {
				vars[k] = render.Variable{Value: asJSON(b), Sensitive: true}
			}
		}
		return nil
	}
	var list corev1.ConfigMapList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return err
	}
	for _, cm := range list.Items {
		for k, v := range cm.Data {
			vars[k] = render.Variable{Value: asJSON([]byte(v))}
		}
	}
	return nil
}

// asJSON takes a value as JSON when it is a JSON document, else as a
// string.
func asJSON(b []byte) json.RawMessage {
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}
