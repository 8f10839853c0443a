package deploy_test

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mqtarget/mqtarget/handlers"
)

// typedObjects decodes every manifest under deploy/kubernetes into its k8s.io/api type (as
// TestManifestsMatchKubernetesSchemas does), keyed by kind and name.
func typedObjects(t *testing.T) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, f := range manifestFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(raw), "\n---\n") {
			if len(strings.TrimSpace(string(stripComments([]byte(doc))))) == 0 {
				continue
			}
			kind, obj, meta, err := decodeManifest([]byte(doc))
			if err != nil {
				t.Fatalf("%s: document %d: %v", f, i+1, err)
			}
			key := kind + "/" + meta.Name
			if _, dup := out[key]; dup {
				t.Errorf("%s: %s is defined twice under deploy/kubernetes", f, key)
			}
			out[key] = obj
		}
	}
	return out
}

// subsetObjects decodes every manifest under deploy/kubernetes into the subset types that
// loadSidecarConfig reads, and returns the ConfigMaps by name beside them.
func subsetObjects(t *testing.T) ([]object, map[string]object) {
	t.Helper()
	var subset []object
	for _, f := range manifestFiles(t) {
		subset = append(subset, yamlDocs[object](t, f)...)
	}
	configMaps := map[string]object{}
	for _, o := range subset {
		if o.Kind == "ConfigMap" {
			configMaps[o.Metadata.Name] = o
		}
	}
	return subset, configMaps
}

func get[T any](t *testing.T, objs map[string]any, key string) T {
	t.Helper()
	o, ok := objs[key].(T)
	if !ok {
		t.Fatalf("no %s under deploy/kubernetes", key)
	}
	return o
}

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("selector %v: %v", sel, err)
		return false
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

func containerNamed(t *testing.T, pod corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no container %q", name)
	}
	return pod.Containers[i]
}

func namedPorts(c corev1.Container) map[string]int32 {
	out := map[string]int32{}
	for _, p := range c.Ports {
		out[p.Name] = p.ContainerPort
	}
	return out
}

// TestScaledDeployment checks deploy/kubernetes/scale/: the Deployment of replicas runs mqtarget as the
// sidecar example does (the same probes, security context and admin port), its Service, disruption
// budget and autoscaler point at its pods, its configuration loads, leaves the echo off, and names as
// brokers the nsqd StatefulSet's pods by the DNS names its headless Service gives them.
func TestScaledDeployment(t *testing.T) {
	objs := typedObjects(t)
	d := get[*appsv1.Deployment](t, objs, "Deployment/mqtarget")
	sidecar := get[*appsv1.Deployment](t, objs, "Deployment/mqtarget-demo")
	podLabels := d.Spec.Template.Labels
	if !selects(t, d.Spec.Selector, podLabels) {
		t.Errorf("Deployment selector %v does not match its pods' labels %v", d.Spec.Selector, podLabels)
	}
	mq := containerNamed(t, d.Spec.Template.Spec, "mqtarget")
	ref := containerNamed(t, sidecar.Spec.Template.Spec, "mqtarget")
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"livenessProbe", mq.LivenessProbe, ref.LivenessProbe},
		{"readinessProbe", mq.ReadinessProbe, ref.ReadinessProbe},
		{"startupProbe", mq.StartupProbe, ref.StartupProbe},
		{"securityContext", mq.SecurityContext, ref.SecurityContext},
		{"admin port", namedPorts(mq)["mqtarget-admin"], namedPorts(ref)["mqtarget-admin"]},
		{"image", mq.Image != "", true},
		{"scrape annotations", d.Spec.Template.Annotations, sidecar.Spec.Template.Annotations},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("mqtarget's %s %+v differs from the sidecar's %+v", c.what, c.got, c.want)
		}
	}
	if mq.Resources.Requests.Memory().IsZero() || mq.Resources.Limits.Memory().IsZero() {
		t.Error("mqtarget has no memory request or limit")
	}

	// The Service, the disruption budget and the autoscaler: all about these pods.
	svc := get[*corev1.Service](t, objs, "Service/mqtarget")
	if !selects(t, &metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, podLabels) {
		t.Errorf("Service mqtarget selector %v matches no pod of the Deployment", svc.Spec.Selector)
	}
	for _, p := range svc.Spec.Ports {
		if _, ok := namedPorts(mq)[p.TargetPort.StrVal]; p.TargetPort.Type != intstr.String || !ok {
			t.Errorf("Service mqtarget port %s: targetPort %v is no named port of mqtarget", p.Name, p.TargetPort.String())
		}
	}
	pdb := get[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/mqtarget")
	if !selects(t, pdb.Spec.Selector, podLabels) {
		t.Errorf("PodDisruptionBudget selector %v matches no pod of the Deployment", pdb.Spec.Selector)
	}
	replicas := int(*d.Spec.Replicas)
	if u := pdb.Spec.MaxUnavailable; u == nil || u.Type != intstr.Int || u.IntValue() < 1 || u.IntValue() >= replicas {
		t.Errorf("PodDisruptionBudget maxUnavailable %v: want 1..%d (a drain must be able to proceed, and not take them all)", u, replicas-1)
	}
	hpa := get[*autoscalingv2.HorizontalPodAutoscaler](t, objs, "HorizontalPodAutoscaler/mqtarget")
	if r := hpa.Spec.ScaleTargetRef; r.APIVersion != "apps/v1" || r.Kind != "Deployment" || r.Name != d.Name {
		t.Errorf("HPA scales %+v, not the Deployment %s", r, d.Name)
	}
	if min := hpa.Spec.MinReplicas; min == nil || int(*min) > replicas || replicas > int(hpa.Spec.MaxReplicas) {
		t.Errorf("HPA %v..%d does not contain the Deployment's %d replicas", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, replicas)
	}
	cpu := slices.IndexFunc(hpa.Spec.Metrics, func(m autoscalingv2.MetricSpec) bool {
		return m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU &&
			m.Resource.Target.Type == autoscalingv2.UtilizationMetricType && m.Resource.Target.AverageUtilization != nil
	})
	if cpu < 0 {
		t.Error("the HPA does not scale on CPU utilisation")
	}
	if mq.Resources.Requests.Cpu().IsZero() {
		t.Error("mqtarget requests no CPU: the HPA's utilisation is a share of the request")
	}

	// mqtarget's configuration, loaded as mqtarget loads it.
	subset, configMaps := subsetObjects(t)
	var dep object
	for _, o := range subset {
		if o.Kind == "Deployment" && o.Metadata.Name == d.Name {
			dep = o
		}
	}
	sub := dep.Spec.Template.Spec.Containers[slices.IndexFunc(dep.Spec.Template.Spec.Containers, func(c container) bool { return c.Name == "mqtarget" })]
	cfg := loadSidecarConfig(t, sub, dep.Spec.Template.Spec, configMaps)
	if got, want := portOf(t, cfg.HTTP.Addr), int(namedPorts(mq)["http"]); got != want {
		t.Errorf("http.addr listens on %d, the container's port http is %d", got, want)
	}
	if cfg.HTTP.AdminAddr == "" || portOf(t, cfg.HTTP.AdminAddr) != int(namedPorts(mq)["mqtarget-admin"]) {
		t.Errorf("http.admin_addr %q is not the container's port mqtarget-admin", cfg.HTTP.AdminAddr)
	}
	if cfg.NSQ.Embedded != 0 || len(cfg.NSQ.Hosts) == 0 {
		t.Errorf("nsq.hosts %v, nsq.embedded %d: want the cluster's nsqd, none embedded", cfg.NSQ.Hosts, cfg.NSQ.Embedded)
	}

	// Every nsq.hosts entry is a pod of the nsqd StatefulSet, by its headless Service's DNS name.
	sts := get[*appsv1.StatefulSet](t, objs, "StatefulSet/nsqd")
	headless := get[*corev1.Service](t, objs, "Service/"+sts.Spec.ServiceName)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s is not headless (clusterIP %q): its pods get no DNS names", headless.Name, headless.Spec.ClusterIP)
	}
	if !selects(t, &metav1.LabelSelector{MatchLabels: headless.Spec.Selector}, sts.Spec.Template.Labels) ||
		!selects(t, sts.Spec.Selector, sts.Spec.Template.Labels) {
		t.Errorf("Service %s or the StatefulSet's selector does not match the nsqd pods", headless.Name)
	}
	nsqdPorts := namedPorts(containerNamed(t, sts.Spec.Template.Spec, "nsqd"))
	for i, h := range cfg.NSQ.Hosts {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			t.Errorf("nsq.hosts[%d] %q: %v", i, h, err)
			continue
		}
		pod, svcName, _ := strings.Cut(host, ".")
		ord, err := strconv.Atoi(strings.TrimPrefix(pod, sts.Name+"-"))
		if svcName != headless.Name || err != nil || ord < 0 || ord >= int(*sts.Spec.Replicas) {
			t.Errorf("nsq.hosts[%d] %q is no pod of StatefulSet %s (%d replicas) under Service %s", i, h, sts.Name, *sts.Spec.Replicas, headless.Name)
		}
		if p, _ := strconv.Atoi(port); int32(p) != nsqdPorts["tcp"] {
			t.Errorf("nsq.hosts[%d] %q: port is not nsqd's tcp port %d", i, h, nsqdPorts["tcp"])
		}
	}
}

// TestManifestsLeaveEchoOff: outside the embedded setup the echo would create mqtarget_roundtrip
// topics (and consume them) on the user's real brokers, so every manifest turns it off.
func TestManifestsLeaveEchoOff(t *testing.T) {
	subset, configMaps := subsetObjects(t)
	var n int
	for _, o := range subset {
		for _, c := range o.Spec.Template.Spec.Containers {
			if o.Kind != "Deployment" || c.Name != "mqtarget" {
				continue
			}
			n++
			cfg := loadSidecarConfig(t, c, o.Spec.Template.Spec, configMaps)
			if cfg.Echo.Enabled || cfg.Echo.RoundTrip {
				t.Errorf("Deployment %s: echo.enabled %v, echo.roundtrip %v: want both off on a real cluster",
					o.Metadata.Name, cfg.Echo.Enabled, cfg.Echo.RoundTrip)
			}
		}
	}
	if n < 2 {
		t.Errorf("%d mqtarget containers among the Deployments, want the sidecar's and the replicas'", n)
	}
}

// varRefRE is a $(VAR) reference in a container's command or args, which the kubelet expands only
// when VAR is one of the container's env (else it passes the text through unchanged).
var varRefRE = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// TestContainerArgsReferenceDeclaredEnv: an undeclared $(VAR) reaches the program as the literal text
// (a -shard of "$(SHARD_INDEX)/3" would be refused, a nsqd broadcast address would be wrong).
func TestContainerArgsReferenceDeclaredEnv(t *testing.T) {
	for key, obj := range typedObjects(t) {
		pod, ok := podSpecOf(obj)
		if !ok {
			continue
		}
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			for _, arg := range append(slices.Clone(c.Command), c.Args...) {
				for _, m := range varRefRE.FindAllStringSubmatch(arg, -1) {
					if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == m[1] }) {
						t.Errorf("%s: container %s: %q refers to $(%s), which is not in its env", key, c.Name, arg, m[1])
					}
				}
			}
		}
	}
}

// podSpecOf returns the pod template of a workload manifest (ok false for kinds that run no pods).
func podSpecOf(obj any) (corev1.PodSpec, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.Spec.Template.Spec, true
	case *appsv1.StatefulSet:
		return o.Spec.Template.Spec, true
	case *batchv1.Job:
		return o.Spec.Template.Spec, true
	}
	return corev1.PodSpec{}, false
}

// The image every manifest runs mqtarget with, as docs/deploy.md ("The image") tells users to build and
// load it into the nodes. The explicit IfNotPresent makes the kubelet use that loaded image: a :latest
// tag without a policy defaults to Always, a pull from a registry that has no such image.
const (
	mqtargetImage      = "mqtarget:dev"
	mqtargetPullPolicy = corev1.PullIfNotPresent
)

// runsMqtarget: a container of ours, by its name or by its image's repository, so that a wrong image
// alone does not take a container out of the check.
func runsMqtarget(c corev1.Container) bool {
	repo, _, _ := strings.Cut(c.Image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return c.Name == "mqtarget" || repo == "mqtarget" || strings.HasSuffix(repo, "/mqtarget")
}

// imageProblem says what is wrong with a mqtarget container's image or pull policy ("" for nothing).
func imageProblem(c corev1.Container) string {
	if c.Image != mqtargetImage || c.ImagePullPolicy != mqtargetPullPolicy {
		return fmt.Sprintf("image %q, imagePullPolicy %q: want %q, %q as every manifest (docs/deploy.md)",
			c.Image, c.ImagePullPolicy, mqtargetImage, mqtargetPullPolicy)
	}
	return ""
}

func TestImageProblem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		c       corev1.Container
		ours    bool
		problem bool
	}{
		{"the sidecar before the fix", corev1.Container{Name: "mqtarget", Image: "mqtarget:latest"}, true, true},
		{"no pull policy", corev1.Container{Name: "mqtarget", Image: "mqtarget:dev"}, true, true},
		{"another policy", corev1.Container{Name: "mqtarget", Image: "mqtarget:dev", ImagePullPolicy: corev1.PullAlways}, true, true},
		{"from a registry, by image", corev1.Container{Name: "load", Image: "registry.example.com:5000/mqtarget:dev", ImagePullPolicy: corev1.PullIfNotPresent}, true, true},
		{"by digest", corev1.Container{Name: "load", Image: "mqtarget@sha256:0123", ImagePullPolicy: corev1.PullIfNotPresent}, true, true},
		{"the load worker", corev1.Container{Name: "load", Image: "mqtarget:dev", ImagePullPolicy: corev1.PullIfNotPresent}, true, false},
		{"the replicas", corev1.Container{Name: "mqtarget", Image: "mqtarget:dev", ImagePullPolicy: corev1.PullIfNotPresent}, true, false},
		{"nsqd", corev1.Container{Name: "nsqd", Image: "nsqio/nsq:v1.3.0"}, false, false},
		{"an application named like us", corev1.Container{Name: "app", Image: "registry.example.com/mqtarget-app:latest"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runsMqtarget(tc.c); got != tc.ours {
				t.Errorf("runsMqtarget %v, want %v", got, tc.ours)
			}
			// What TestManifestsUseOneMqtargetImage reports: only our containers are held to our image.
			if got := imageProblem(tc.c); (tc.ours && got != "") != tc.problem {
				t.Errorf("imageProblem %q, want a problem reported: %v", got, tc.problem)
			}
		})
	}
}

// TestManifestsUseOneMqtargetImage: every mqtarget container of every manifest runs the image docs/deploy.md
// names with its pull policy, so one `kind load docker-image mqtarget:dev` serves them all.
func TestManifestsUseOneMqtargetImage(t *testing.T) {
	var checked []string
	for key, obj := range typedObjects(t) {
		pod, ok := podSpecOf(obj)
		if !ok {
			continue
		}
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			if !runsMqtarget(c) {
				continue
			}
			checked = append(checked, key+" "+c.Name)
			if p := imageProblem(c); p != "" {
				t.Errorf("%s: container %s: %s", key, c.Name, p)
			}
		}
	}
	// The sidecar's, the replicas' and the load workers': none escaped the check by its name and image.
	slices.Sort(checked)
	want := []string{"Deployment/mqtarget mqtarget", "Deployment/mqtarget-demo mqtarget", "Job/mqtarget-load load"}
	if !slices.Equal(checked, want) {
		t.Errorf("mqtarget containers checked: %q, want %q", checked, want)
	}
}

// TestLoadJob checks the Indexed Job of deploy/kubernetes/load/: N workers, all running at once, each
// `mqtarget load -shard I/N` with I its completion index, all with the -start-at of one ConfigMap that
// run.sh creates, printing JSON (what run.sh collects from the logs for mqtarget report), against the
// scaled Deployment's Service, with the Deployment's image; a refused start fails the whole Job.
func TestLoadJob(t *testing.T) {
	objs := typedObjects(t)
	job := get[*batchv1.Job](t, objs, "Job/mqtarget-load")
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("completionMode %v: want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != *s.Parallelism || *s.Completions < 2 {
		t.Fatalf("completions %s, parallelism %s: want equal, at least 2 (every shard at once)", ptrString(s.Completions), ptrString(s.Parallelism))
	}
	n := int(*s.Completions)
	if s.BackoffLimit == nil || *s.BackoffLimit != 0 {
		t.Errorf("backoffLimit %v: a retried shard starts after -start-at and is refused; want 0", s.BackoffLimit)
	}
	pod := s.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q: want Never (the podFailurePolicy needs it, and the logs stay)", pod.RestartPolicy)
	}
	c := containerNamed(t, pod, "load")
	failsOnBadInput := s.PodFailurePolicy != nil && slices.ContainsFunc(s.PodFailurePolicy.Rules, func(r batchv1.PodFailurePolicyRule) bool {
		return r.Action == batchv1.PodFailurePolicyActionFailJob && r.OnExitCodes != nil &&
			r.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && slices.Contains(r.OnExitCodes.Values, 2) &&
			(r.OnExitCodes.ContainerName == nil || *r.OnExitCodes.ContainerName == c.Name)
	})
	if !failsOnBadInput {
		t.Error("no podFailurePolicy rule fails the Job on exit code 2 (mqtarget's bad input, e.g. a -start-at already past)")
	}

	if len(c.Args) == 0 || c.Args[0] != "load" {
		t.Fatalf("args %q: want the load subcommand", c.Args)
	}
	flags := map[string]string{}
	for i := 1; i < len(c.Args)-1; i++ {
		if strings.HasPrefix(c.Args[i], "-") {
			flags[c.Args[i]] = c.Args[i+1]
			i++
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	shard, total, _ := strings.Cut(flags["-shard"], "/")
	if total != strconv.Itoa(n) {
		t.Errorf("-shard %q: want I/%d, the Job's completions", flags["-shard"], n)
	}
	if m := varRefRE.FindStringSubmatch(shard); m == nil || m[0] != shard {
		t.Errorf("-shard %q: the index must be a $(VAR) of the completion index", flags["-shard"])
	} else if f := env[m[1]].ValueFrom; f == nil || f.FieldRef == nil ||
		f.FieldRef.FieldPath != "metadata.annotations['"+batchv1.JobCompletionIndexAnnotation+"']" {
		t.Errorf("%s is not the pod's completion index annotation: %+v", m[1], env[m[1]])
	}

	// -start-at: one value for every pod, from the ConfigMap run.sh creates just before the Job.
	m := varRefRE.FindStringSubmatch(flags["-start-at"])
	if m == nil {
		t.Fatalf("-start-at %q: want a $(VAR) that every pod reads from the same ConfigMap", flags["-start-at"])
	}
	ref := env[m[1]].ValueFrom
	if ref == nil || ref.ConfigMapKeyRef == nil {
		t.Fatalf("%s does not come from a ConfigMap: %+v", m[1], env[m[1]])
	}
	script, err := os.ReadFile("kubernetes/load/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"START=" + ref.ConfigMapKeyRef.Name,
		`create configmap "$START" --from-literal=` + ref.ConfigMapKeyRef.Key + "=",
		"readonly JOB=" + job.Name,
		"mqtarget-load-job.yaml",
		"job-completion-index=$i",
		"report",
	} {
		if !strings.Contains(string(script), want) {
			t.Errorf("run.sh does not contain %q: it and the Job disagree", want)
		}
	}
	if flags["-o"] != "json" {
		t.Errorf("-o %q: mqtarget report merges JSON", flags["-o"])
	}
	if flags["-rate"] == "" {
		t.Error("no -rate: the open model's schedule is what the shards interleave")
	}

	// The target: the scaled Deployment's Service, a send endpoint.
	u, err := url.Parse(c.Args[len(c.Args)-1])
	if err != nil {
		t.Fatalf("URL %q: %v", c.Args[len(c.Args)-1], err)
	}
	svc, ok := objs["Service/"+u.Hostname()].(*corev1.Service)
	if !ok {
		t.Fatalf("URL %s: host %q is no Service of the manifests", u, u.Hostname())
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return fmt.Sprint(p.Port) == u.Port() && p.Name == "http" }) {
		t.Errorf("URL %s: port %s is not Service %s's http port", u, u.Port(), svc.Name)
	}
	if !slices.ContainsFunc(handlers.Endpoints(), func(e handlers.Endpoint) bool { return e.Send && e.Path == u.Path }) {
		t.Errorf("URL %s: %s is no send endpoint", u, u.Path)
	}
	d := get[*appsv1.Deployment](t, objs, "Deployment/mqtarget")
	if img := containerNamed(t, d.Spec.Template.Spec, "mqtarget").Image; c.Image != img {
		t.Errorf("the Job's image %q is not the Deployment's %q", c.Image, img)
	}
	if c.SecurityContext == nil || c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot {
		t.Error("the load container does not run as non-root")
	}

	// The arguments as the kubelet expands them, given to the real mqtarget with a start 25 h ahead:
	// every flag parses and the only complaint is about -start-at (it sends nothing).
	if testing.Short() {
		return
	}
	expanded := map[string]string{"SHARD_INDEX": "0", m[1]: strconv.FormatInt(time.Now().Add(25*time.Hour).Unix(), 10)}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = varRefRE.ReplaceAllStringFunc(a, func(ref string) string { return expanded[varRefRE.FindStringSubmatch(ref)[1]] })
	}
	run := exec.Command(buildMqtarget(t, ""), args...)
	var stderr strings.Builder
	run.Stderr = &stderr
	err = run.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr.String(), "-start-at:") ||
		strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 {
		first, _, _ := strings.Cut(stderr.String(), "\n")
		t.Errorf("mqtarget %q: %v, stderr begins %q; want exit 2 naming -start-at alone", args, err, first)
	}
}

// TestPodMonitor: the Prometheus Operator's PodMonitor selects the replicas and the sidecar pods and
// scrapes the named admin port's /metrics.
func TestPodMonitor(t *testing.T) {
	objs := typedObjects(t)
	pm := get[*podMonitor](t, objs, "PodMonitor/mqtarget")
	adminPaths := map[string]bool{}
	for _, e := range handlers.Endpoints() {
		if e.Admin {
			adminPaths[e.Path] = true
		}
	}
	for _, name := range []string{"mqtarget", "mqtarget-demo"} {
		d := get[*appsv1.Deployment](t, objs, "Deployment/"+name)
		if !selects(t, &pm.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("PodMonitor selector does not match Deployment %s's pods %v", name, d.Spec.Template.Labels)
		}
		ports := namedPorts(containerNamed(t, d.Spec.Template.Spec, "mqtarget"))
		for _, e := range pm.Spec.PodMetricsEndpoints {
			if _, ok := ports[e.Port]; !ok {
				t.Errorf("PodMonitor port %q is no named port of %s's mqtarget (%v)", e.Port, name, ports)
			}
			if !adminPaths[e.Path] || e.Path != "/metrics" {
				t.Errorf("PodMonitor path %q: want /metrics", e.Path)
			}
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) == 0 {
		t.Error("PodMonitor has no podMetricsEndpoints")
	}
	if !slices.Contains(pm.Spec.ScrapeProtocols, "PrometheusProto") {
		t.Error("PodMonitor does not offer PrometheusProto, the only format that carries native histograms")
	}
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
