package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kinds maps the apiVersion and kind of every object the examples use to a new value of its Go type
// from k8s.io/api, the types the API server decodes into; an object of another kind fails the test.
var kinds = map[string]func() (any, *metav1.ObjectMeta){
	"v1/ConfigMap":        func() (any, *metav1.ObjectMeta) { o := &corev1.ConfigMap{}; return o, &o.ObjectMeta },
	"v1/Service":          func() (any, *metav1.ObjectMeta) { o := &corev1.Service{}; return o, &o.ObjectMeta },
	"v1/Pod":              func() (any, *metav1.ObjectMeta) { o := &corev1.Pod{}; return o, &o.ObjectMeta },
	"apps/v1/Deployment":  func() (any, *metav1.ObjectMeta) { o := &appsv1.Deployment{}; return o, &o.ObjectMeta },
	"apps/v1/StatefulSet": func() (any, *metav1.ObjectMeta) { o := &appsv1.StatefulSet{}; return o, &o.ObjectMeta },
	"batch/v1/Job":        func() (any, *metav1.ObjectMeta) { o := &batchv1.Job{}; return o, &o.ObjectMeta },
	"policy/v1/PodDisruptionBudget": func() (any, *metav1.ObjectMeta) {
		o := &policyv1.PodDisruptionBudget{}
		return o, &o.ObjectMeta
	},
	"autoscaling/v2/HorizontalPodAutoscaler": func() (any, *metav1.ObjectMeta) {
		o := &autoscalingv2.HorizontalPodAutoscaler{}
		return o, &o.ObjectMeta
	},
	"monitoring.coreos.com/v1/PodMonitor": func() (any, *metav1.ObjectMeta) { o := &podMonitor{}; return o, &o.ObjectMeta },
}

// podMonitor is the Prometheus Operator's PodMonitor (monitoring.coreos.com/v1), the fields of its CRD
// that the example uses or could plausibly misspell, transcribed with their JSON names and types: its Go
// module is not a dependency here. A field the CRD has and this type lacks fails the test, so add it
// here (with the CRD's name and type) before using it.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		PodTargetLabels   []string             `json:"podTargetLabels,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		SampleLimit             *uint64  `json:"sampleLimit,omitempty"`
		ScrapeProtocols         []string `json:"scrapeProtocols,omitempty"`
		ScrapeClassicHistograms *bool    `json:"scrapeClassicHistograms,omitempty"`
		PodMetricsEndpoints     []struct {
			Port          string              `json:"port,omitempty"`
			Path          string              `json:"path,omitempty"`
			Scheme        string              `json:"scheme,omitempty"`
			Interval      string              `json:"interval,omitempty"`
			ScrapeTimeout string              `json:"scrapeTimeout,omitempty"`
			HonorLabels   bool                `json:"honorLabels,omitempty"`
			Params        map[string][]string `json:"params,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// scrapeProtocols are the values the PodMonitor CRD's scrapeProtocols enum allows.
var scrapeProtocols = []string{"PrometheusProto", "OpenMetricsText0.0.1", "OpenMetricsText1.0.0", "PrometheusText0.0.4", "PrometheusText1.0.0"}

// manifestFiles returns every manifest under deploy/kubernetes, in its subdirectories too.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("kubernetes", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) == ".yaml" {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	return files
}

// TestManifestsMatchKubernetesSchemas decodes every manifest strictly into the k8s.io/api types: an
// unknown or misspelt field, a duplicate key, a string where a number belongs or an unparsable quantity
// ("512Mi" yes, "512MB" no) is an error, as kubectl apply's server-side field validation makes it.
// kubeconform is not a Go module here and its schemas would have to be downloaded, so the types stand in
// for the OpenAPI schemas they are generated with.
func TestManifestsMatchKubernetesSchemas(t *testing.T) {
	seen := map[string]int{}
	for _, f := range manifestFiles(t) {
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
			switch o := obj.(type) {
			case *appsv1.Deployment:
				checkPodSpec(t, f, o.Spec.Template.Spec)
			case *appsv1.StatefulSet:
				checkPodSpec(t, f, o.Spec.Template.Spec)
			case *batchv1.Job:
				checkPodSpec(t, f, o.Spec.Template.Spec)
			case *podMonitor:
				for _, p := range o.Spec.ScrapeProtocols {
					if !slices.Contains(scrapeProtocols, p) {
						t.Errorf("%s: PodMonitor scrapeProtocols %q: not one of %v", f, p, scrapeProtocols)
					}
				}
			}
		}
	}
	for _, kind := range []string{"ConfigMap", "Deployment", "Service", "StatefulSet", "Job", "PodDisruptionBudget", "HorizontalPodAutoscaler", "PodMonitor"} {
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
		{"Job field misspelt", "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {completionsMode: Indexed}\n", "completionsMode"},
		{"PodMonitor field misspelt", "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: m}\nspec:\n  podMetricEndpoints: [{port: a}]\n", "podMetricEndpoints"},
		{"PodMonitor endpoint field misspelt", "apiVersion: monitoring.coreos.com/v1\nkind: PodMonitor\nmetadata: {name: m}\nspec:\n  podMetricsEndpoints: [{targetPortt: a}]\n", "targetPortt"},
		{"HPA string for a number", "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {maxReplicas: \"3\"}\n", "maxReplicas"},
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
