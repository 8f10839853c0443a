package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kinds maps the apiVersion and kind of every object the examples use to a new value of its Go type
// from k8s.io/api, the types the API server decodes into; an object of another kind fails the test.
var kinds = map[string]func() (any, *metav1.ObjectMeta){
	"v1/ConfigMap":       func() (any, *metav1.ObjectMeta) { o := &corev1.ConfigMap{}; return o, &o.ObjectMeta },
	"v1/Service":         func() (any, *metav1.ObjectMeta) { o := &corev1.Service{}; return o, &o.ObjectMeta },
	"v1/Pod":             func() (any, *metav1.ObjectMeta) { o := &corev1.Pod{}; return o, &o.ObjectMeta },
	"apps/v1/Deployment": func() (any, *metav1.ObjectMeta) { o := &appsv1.Deployment{}; return o, &o.ObjectMeta },
}

// TestManifestsMatchKubernetesSchemas decodes every manifest strictly into the k8s.io/api types: an
// unknown or misspelt field, a duplicate key, a string where a number belongs or an unparsable quantity
// ("512Mi" yes, "512MB" no) is an error, as kubectl apply's server-side field validation makes it.
// kubeconform is not a Go module here and its schemas would have to be downloaded, so the types stand in
// for the OpenAPI schemas they are generated with.
func TestManifestsMatchKubernetesSchemas(t *testing.T) {
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	seen := map[string]int{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for i := 1; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: document %d: %v", f, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			kind, obj, meta, err := decodeManifest(doc)
			if err != nil {
				t.Errorf("%s: document %d: %v", f, i, err)
				continue
			}
			seen[kind]++
			for _, msg := range validation.IsDNS1123Subdomain(meta.Name) {
				t.Errorf("%s: %s metadata.name %q: %s", f, kind, meta.Name, msg)
			}
			for k, v := range meta.Labels {
				for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
					t.Errorf("%s: %s label %s=%s: %s", f, kind, k, v, msg)
				}
			}
			if d, ok := obj.(*appsv1.Deployment); ok {
				checkPodSpec(t, f, d.Spec.Template.Spec)
			}
		}
	}
	for _, kind := range []string{"ConfigMap", "Deployment", "Service"} {
		if seen[kind] == 0 {
			t.Errorf("no %s among the manifests (%v)", kind, seen)
		}
	}
}

// decodeManifest decodes one YAML document strictly into the k8s.io/api type of its apiVersion and kind.
func decodeManifest(doc []byte) (kind string, obj any, meta *metav1.ObjectMeta, err error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", nil, nil, err
	}
	key := tm.APIVersion + "/" + tm.Kind
	newObj, ok := kinds[key]
	if !ok {
		return "", nil, nil, fmt.Errorf("%s is not a kind this test knows; add its k8s.io/api type", key)
	}
	obj, meta = newObj()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", key, err)
	}
	return tm.Kind, obj, meta, nil
}

// TestDecodeManifestRejects: the strict decoding the manifests pass does refuse what kubectl would.
func TestDecodeManifestRejects(t *testing.T) {
	const pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: i\n"
	if _, _, _, err := decodeManifest([]byte(pod)); err != nil {
		t.Fatalf("a valid pod: %v", err)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", pod + "    imagePullPolice: Always\n", "imagePullPolice"},
		{"misplaced field", strings.Replace(pod, "spec:", "spec:\n  replicas: 2", 1), "replicas"},
		{"string for a number", pod + "    ports: [{containerPort: \"8081\"}]\n", "containerPort"},
		{"bad quantity", pod + "    resources: {limits: {memory: 512MB}}\n", "quantities must match"},
		{"duplicate key", pod + "    image: j\n", "image"},
		{"unknown kind", "apiVersion: v1\nkind: Secrett\nmetadata: {name: s}\n", "Secrett"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := decodeManifest([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// checkPodSpec applies the API server's rules the types cannot express and the examples could break.
func checkPodSpec(t *testing.T, file string, pod corev1.PodSpec) {
	t.Helper()
	if len(pod.Containers) == 0 {
		t.Errorf("%s: the pod has no containers", file)
	}
	for _, c := range pod.Containers {
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			t.Errorf("%s: container name %q: %s", file, c.Name, msg)
		}
		for _, p := range c.Ports {
			for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
				t.Errorf("%s: %s port %d: %s", file, c.Name, p.ContainerPort, msg)
			}
			if p.Name != "" {
				for _, msg := range validation.IsValidPortName(p.Name) {
					t.Errorf("%s: %s port name %q: %s", file, c.Name, p.Name, msg)
				}
			}
		}
		for name, q := range c.Resources.Limits {
			if req, ok := c.Resources.Requests[name]; ok && req.Cmp(q) > 0 {
				t.Errorf("%s: %s requests %s %s above its limit %s", file, c.Name, name, req.String(), q.String())
			}
		}
	}
}

// stripComments drops comment-only lines, so a document of comments alone counts as empty.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}
