package deploy

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kedav1alpha1 "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/inferscale/inferscale/residency"
	"github.com/inferscale/inferscale/residency/plan"
	"github.com/inferscale/inferscale/scaler"
)

// Exact RBAC of the chart. The scaler reads ScaledObjects (bounds, scale target) and the scale
// targets (ready replicas) and records events in its namespace: by default all in one Role, as
// its informers watch only the release namespace (--watch-namespace); with
// scaler.watchAllNamespaces the read rules are a ClusterRole and the Role keeps only events.
// The residency sidecar only records events. Anything more (a write verb, another resource, a
// ClusterRole by default, a second one when shared) fails the test.
var (
	wantScalerReadRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"keda.sh"}, Resources: []string{"scaledobjects"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}, // measured cold start
	}
	wantScalerEventRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	// Default (one scaler per namespace): one Role with every rule, no ClusterRole.
	wantScalerRules = slices.Concat(wantScalerReadRules, wantScalerEventRules)
	// Shared scaler: the read rules and events cluster-wide (it writes events on ScaledObjects
	// of every namespace), events in the release namespace too.
	wantSharedScalerClusterRules = wantScalerRules
	wantSharedScalerRules        = wantScalerEventRules
	wantPoolRules                = []rbacv1.PolicyRule{
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
)

const (
	scalerName        = "rel-inferscale-scaler"
	scalerClusterRole = "team-a-rel-inferscale-scaler"
	poolRole          = "rel-inferscale-pool"
)

func scalerFlagDecls(t *testing.T) []flagDecl {
	t.Helper()
	d, err := readFlagDecls("../cmd/scaler/main.go")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// residencyFlagDecls returns cmd/residency's flags, or skips when its main.go has not landed.
func residencyFlagDecls(t *testing.T) []flagDecl {
	t.Helper()
	d, err := readFlagDecls("../cmd/residency/main.go")
	if errors.Is(err, errNoMain) {
		t.Skipf("cannot check the sidecar's flags: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func container(cs []corev1.Container, name string) (corev1.Container, bool) {
	i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return corev1.Container{}, false
	}
	return cs[i], true
}

// sidecar returns the pod's residency container, as a native sidecar or a plain container.
func sidecar(spec corev1.PodSpec) (corev1.Container, bool) {
	if c, ok := container(spec.InitContainers, "residency"); ok {
		return c, true
	}
	return container(spec.Containers, "residency")
}

// scalerConfig parses the rendered scaler arguments with cmd/scaler's flags.
func scalerConfig(t *testing.T, d *appsv1.Deployment) scaler.Config {
	t.Helper()
	c, ok := container(d.Spec.Template.Spec.Containers, "scaler")
	if !ok {
		t.Fatalf("%s has no scaler container", d.Name)
	}
	cfg := scaler.DefaultConfig()
	if err := parseFlags(&cfg, scalerFlagDecls(t), c.Args); err != nil {
		t.Fatalf("scaler args %q: %v", c.Args, err)
	}
	return cfg
}

// residencyConfig parses a rendered sidecar's arguments with cmd/residency's flags. Namespace
// comes from $POD_NAMESPACE in the pod (the downward API), which the chart sets.
func residencyConfig(t *testing.T, decls []flagDecl, c corev1.Container) residency.Config {
	t.Helper()
	cfg := residency.DefaultConfig()
	if err := parseFlags(&cfg, decls, c.Args); err != nil {
		t.Fatalf("residency args %q: %v", c.Args, err)
	}
	if cfg.Namespace == "" && slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}) {
		cfg.Namespace = namespace
	}
	return cfg
}

// drainDeadline is the longest a sidecar drain may take: the propagation delay, then the drain
// timeout (residency.Config: DrainTimeout "bounds a drain after the propagation delay").
func drainDeadline(t *testing.T, c corev1.Container) time.Duration {
	t.Helper()
	args := argMap(c.Args)
	var total time.Duration
	for _, name := range []string{"drain-timeout", "propagation-delay"} {
		v, ok := args[name]
		if !ok {
			t.Fatalf("sidecar args %q: no --%s (the chart must not rely on a default it cannot see)", c.Args, name)
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("--%s=%s: %v", name, v, err)
		}
		total += d
	}
	return total
}

// TestNoReplicasOnScaledDeployments: a Deployment a ScaledObject owns must not carry replicas,
// or every `helm upgrade` resets the pool under the HPA's feet.
func TestNoReplicasOnScaledDeployments(t *testing.T) {
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			o := renderObjects(t, rc)
			for _, so := range o.scaledObjects {
				ref := so.Spec.ScaleTargetRef
				if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" {
					t.Errorf("ScaledObject %s targets %s %s, want apps/v1 Deployment", so.Name, ref.APIVersion, ref.Kind)
				}
				d, ok := o.deployments[ref.Name]
				if !ok {
					t.Fatalf("ScaledObject %s targets Deployment %q, which the chart does not render", so.Name, ref.Name)
				}
				if d.Spec.Replicas != nil {
					t.Errorf("Deployment %s is owned by ScaledObject %s but sets replicas: %d", d.Name, so.Name, *d.Spec.Replicas)
				}
			}
			for name, d := range o.deployments {
				if d.Labels["app.kubernetes.io/component"] != "pool" {
					continue
				}
				if _, ok := o.scaledObjects[name]; !ok {
					t.Errorf("pool Deployment %s has no ScaledObject", name)
				}
			}
		})
	}
}

// TestGracePeriodOutlastsDrain: Kubernetes signals every container of a pod at once and kills
// them when terminationGracePeriodSeconds ends, so the grace period must exceed the sidecar's
// whole drain, and Triton's preStop must wait on the sidecar's POST /drain.
func TestGracePeriodOutlastsDrain(t *testing.T) {
	sawSidecar := false
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			o := renderObjects(t, rc)
			for _, d := range o.deployments {
				if d.Labels["app.kubernetes.io/component"] != "pool" {
					continue
				}
				spec := d.Spec.Template.Spec
				if spec.TerminationGracePeriodSeconds == nil {
					t.Fatalf("%s: no terminationGracePeriodSeconds", d.Name)
				}
				grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
				sc, ok := sidecar(spec)
				if !ok {
					eng, _ := container(spec.Containers, "engine")
					if eng.Lifecycle == nil || eng.Lifecycle.PreStop == nil || eng.Lifecycle.PreStop.Sleep == nil {
						t.Fatalf("%s: engine without a preStop sleep", d.Name)
					}
					if sleep := time.Duration(eng.Lifecycle.PreStop.Sleep.Seconds) * time.Second; grace <= sleep {
						t.Errorf("%s: grace %v <= preStop sleep %v", d.Name, grace, sleep)
					}
					continue
				}
				sawSidecar = true
				deadline := drainDeadline(t, sc)
				if grace <= deadline {
					t.Errorf("%s: terminationGracePeriodSeconds %v <= drain deadline %v", d.Name, grace, deadline)
				}
				port := sc.Ports[0].ContainerPort
				tr, ok := container(spec.Containers, "triton")
				if !ok {
					t.Fatalf("%s: sidecar without a triton container", d.Name)
				}
				if tr.Lifecycle == nil || tr.Lifecycle.PreStop == nil || tr.Lifecycle.PreStop.Exec == nil {
					t.Fatalf("%s: triton has no exec preStop", d.Name)
				}
				hook := strings.Join(tr.Lifecycle.PreStop.Exec.Command, " ")
				if want := fmt.Sprintf("http://127.0.0.1:%d/drain", port); !strings.Contains(hook, want) || !strings.Contains(hook, "-X POST") {
					t.Errorf("%s: preStop %q does not POST %s", d.Name, hook, want)
				}
				// curl's own timeout must not cut the drain short, nor outlive the grace period.
				m := regexp.MustCompile(`--max-time (\d+)`).FindStringSubmatch(hook)
				if m == nil {
					t.Fatalf("%s: preStop %q without curl --max-time", d.Name, hook)
				}
				maxTime, _ := strconv.Atoi(m[1])
				if mt := time.Duration(maxTime) * time.Second; mt <= deadline || mt >= grace {
					t.Errorf("%s: curl --max-time %v not in (drain deadline %v, grace %v)", d.Name, mt, deadline, grace)
				}
				rp := tr.ReadinessProbe
				if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" || rp.HTTPGet.Port.IntValue() != int(port) {
					t.Errorf("%s: triton readiness %+v, want GET /readyz on the sidecar's port %d", d.Name, rp, port)
				}
				if !slices.Contains(tr.Args, "--model-control-mode=explicit") {
					t.Errorf("%s: triton args %q without --model-control-mode=explicit", d.Name, tr.Args)
				}
				if c, native := container(spec.InitContainers, "residency"); native && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
					t.Errorf("%s: residency init container is not a native sidecar (restartPolicy Always)", d.Name)
				}
			}
		})
	}
	if !sawSidecar {
		t.Error("no render case has a residency sidecar")
	}
}

// TestHeldBytesFitMemoryLimit: in every render, the bytes the sidecar's front may hold
// for all models together (--hold-max-total-bytes, its own default 256 MiB when the flag is
// absent) are at most half the sidecar's memory limit, so a pod holding its full budget
// during a model load is not OOM-killed; and the sidecar runs under a GOMEMLIMIT between the
// held bytes plus its own heap and the forwarded requests its front keeps (16 MiB each) and the
// limit less the binary's mapped pages (20 MiB):
// without one, the heap grows to twice what is live before a collection (measured: 125–137 MiB
// RSS under a 128Mi limit, BENCHMARKS.md "Sidecar memory while holding").
func TestHeldBytesFitMemoryLimit(t *testing.T) {
	forEachSidecar(t, func(t *testing.T, d *appsv1.Deployment, sc corev1.Container) {
		held := int64(256 << 20)
		if v, ok := argMap(sc.Args)["hold-max-total-bytes"]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: --hold-max-total-bytes=%q: %v", d.Name, v, err)
			}
			held = n
		}
		limit, ok := sc.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			t.Fatalf("%s: sidecar without a memory limit", d.Name)
		}
		if 2*held > limit.Value() {
			t.Errorf("%s: --hold-max-total-bytes %d > half the sidecar's memory limit %s", d.Name, held, limit.String())
		}
		gml, err := goMemLimit(sc.Env)
		if err != nil {
			t.Fatal(err)
		}
		if gml < held+32<<20 || gml > limit.Value()-20<<20 {
			t.Errorf("%s: sidecar GOMEMLIMIT %d bytes with --hold-max-total-bytes %d and a %s memory limit: want set, ≥ held + 32 MiB and ≤ limit − 20 MiB",
				d.Name, gml, held, limit.String())
		}
	})
}

// forEachSidecar calls fn, in a subtest per render case, for every Deployment with a
// residency sidecar, and fails when no render case has one.
func forEachSidecar(t *testing.T, fn func(t *testing.T, d *appsv1.Deployment, sc corev1.Container)) {
	t.Helper()
	saw := false
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			o := renderObjects(t, rc)
			for _, d := range o.deployments {
				if sc, ok := sidecar(d.Spec.Template.Spec); ok {
					saw = true
					fn(t, d, sc)
				}
			}
		})
	}
	if !saw {
		t.Error("no render case has a residency sidecar")
	}
}

// TestRBACExact pins every Role's rules and that bindings only bind the chart's own
// ServiceAccounts to the chart's own Roles.
func TestRBACExact(t *testing.T) {
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			o := renderObjects(t, rc)
			wantRules, wantClusterRoles, wantClusterBinds := wantScalerRules, []string(nil), []string(nil)
			if rc.sharedScaler {
				wantRules, wantClusterRoles, wantClusterBinds = wantSharedScalerRules, []string{scalerClusterRole}, []string{scalerClusterRole}
			}
			if diff := cmp.Diff(wantRules, o.roles[scalerName].Rules); diff != "" {
				t.Errorf("scaler Role rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantClusterRoles, slices.Sorted(mapKeys(o.clusterRoles))); diff != "" {
				t.Fatalf("ClusterRoles (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantClusterBinds, slices.Sorted(mapKeys(o.clusterBinds))); diff != "" {
				t.Fatalf("ClusterRoleBindings (-want +got):\n%s", diff)
			}
			if rc.sharedScaler {
				if diff := cmp.Diff(wantSharedScalerClusterRules, o.clusterRoles[scalerClusterRole].Rules); diff != "" {
					t.Errorf("scaler ClusterRole rules (-want +got):\n%s", diff)
				}
			}
			for _, b := range o.clusterBinds {
				want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: scalerName, Namespace: namespace}}
				if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != scalerClusterRole || !cmp.Equal(want, b.Subjects) {
					t.Errorf("ClusterRoleBinding %s: %+v %+v, want the scaler's ServiceAccount bound to %s", b.Name, b.RoleRef, b.Subjects, scalerClusterRole)
				}
			}
			if r, ok := o.roles[poolRole]; ok {
				if diff := cmp.Diff(wantPoolRules, r.Rules); diff != "" {
					t.Errorf("pool Role rules (-want +got):\n%s", diff)
				}
			}
			for name := range o.roles {
				if name != scalerName && name != poolRole {
					t.Errorf("unexpected Role %s", name)
				}
			}
			for _, b := range o.roleBindings {
				if _, ok := o.roles[b.RoleRef.Name]; !ok || b.RoleRef.Kind != "Role" {
					t.Errorf("RoleBinding %s binds %s %s, not one of the chart's Roles", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
				}
				for _, s := range b.Subjects {
					if _, ok := o.serviceAccts[s.Name]; !ok || s.Kind != "ServiceAccount" || s.Namespace != namespace {
						t.Errorf("RoleBinding %s subject %+v is not one of the chart's ServiceAccounts", b.Name, s)
					}
				}
			}
			// Only the sidecar gets an API token; Triton and the engines get none.
			for _, d := range o.deployments {
				spec := d.Spec.Template.Spec
				if d.Labels["app.kubernetes.io/component"] != "pool" {
					continue
				}
				if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
					t.Errorf("%s: automountServiceAccountToken is not false", d.Name)
				}
				for _, c := range spec.Containers {
					if c.Name == "residency" {
						continue
					}
					for _, m := range c.VolumeMounts {
						if strings.Contains(m.MountPath, "serviceaccount") {
							t.Errorf("%s: container %s mounts an API token", d.Name, c.Name)
						}
					}
				}
			}
		})
	}
}

// TestScaledObjects checks every trigger against the scaler's own metadata parser and KEDA's
// semantics: one external trigger at the scaler's Service, AverageValue (target 1 lands the
// HPA on the scaler's number and is what KEDA's fallback needs), bounds equal to the policy's,
// a fallback, and an HPA behaviour that leaves the windows to the scaler.
func TestScaledObjects(t *testing.T) {
	zeroTolerance := map[string]bool{"triton-example": true, "vllm-example": true, "tls": true, "monitoring": false}
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			o := renderObjects(t, rc)
			sc := scalerConfig(t, o.deployments[scalerName])
			svc := o.services[scalerName]
			grpcPort := svc.Spec.Ports[slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "grpc" })].Port
			wantAddr := fmt.Sprintf("%s.%s.svc:%d", scalerName, namespace, grpcPort)
			for _, so := range o.scaledObjects {
				if len(so.Spec.Triggers) != 1 {
					t.Fatalf("%s: %d triggers, want 1", so.Name, len(so.Spec.Triggers))
				}
				tr := so.Spec.Triggers[0]
				if tr.Type != "external" && tr.Type != "external-push" {
					t.Errorf("%s: trigger type %q", so.Name, tr.Type)
				}
				if tr.MetricType != "AverageValue" {
					t.Errorf("%s: metricType %q, want AverageValue", so.Name, tr.MetricType)
				}
				meta := maps.Clone(tr.Metadata)
				if meta["scalerAddress"] != wantAddr {
					t.Errorf("%s: scalerAddress %q, want %q", so.Name, meta["scalerAddress"], wantAddr)
				}
				p, err := scaler.ParseMetadata(meta, scaler.Defaults{PrometheusAddress: sc.PrometheusAddress})
				if err != nil {
					t.Fatalf("%s: the scaler rejects the chart's metadata: %v", so.Name, err)
				}
				if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount != p.MinReplicas ||
					so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount != p.MaxReplicas {
					t.Errorf("%s: min/maxReplicaCount %v/%v differ from the policy's %d/%d", so.Name,
						so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount, p.MinReplicas, p.MaxReplicas)
				}
				if f := so.Spec.Fallback; f == nil || f.FailureThreshold < 1 || f.Behavior != kedav1alpha1.FallbackBehaviorCurrentReplicasIfHigher {
					t.Errorf("%s: fallback %+v, want failureThreshold >= 1 and currentReplicasIfHigher", so.Name, f)
				}
				hpa := so.Spec.Advanced.HorizontalPodAutoscalerConfig
				if hpa.Name != so.Name {
					t.Errorf("%s: HPA name %q", so.Name, hpa.Name)
				}
				for dir, rules := range map[string]*autoscalingv2.HPAScalingRules{"scaleUp": hpa.Behavior.ScaleUp, "scaleDown": hpa.Behavior.ScaleDown} {
					if rules == nil || rules.StabilizationWindowSeconds == nil || *rules.StabilizationWindowSeconds != 0 {
						t.Errorf("%s: %s stabilizationWindowSeconds is not 0: the scaler owns the windows", so.Name, dir)
						continue
					}
					if got := rules.Tolerance != nil && rules.Tolerance.IsZero(); got != zeroTolerance[rc.name] {
						t.Errorf("%s: %s tolerance %v, want zero=%v", so.Name, dir, rules.Tolerance, zeroTolerance[rc.name])
					}
				}
				if ref := tr.AuthenticationRef; ref != nil {
					ta, ok := o.triggerAuths[ref.Name]
					if !ok {
						t.Fatalf("%s: authenticationRef %q not rendered", so.Name, ref.Name)
					}
					checkTriggerAuth(t, o, ta, sc)
				} else if sc.TLSCertFile != "" {
					t.Errorf("%s: the scaler serves TLS but the trigger has no authenticationRef", so.Name)
				}
			}
		})
	}
}

// checkTriggerAuth: KEDA's external scaler reads caCert, and for mTLS tlsClientCert and
// tlsClientKey, from the TriggerAuthentication; each must point at a rendered Secret key.
func checkTriggerAuth(t *testing.T, o *objects, ta *kedav1alpha1.TriggerAuthentication, sc scaler.Config) {
	t.Helper()
	var params []string
	for _, r := range ta.Spec.SecretTargetRef {
		params = append(params, r.Parameter)
		s, ok := o.secrets[r.Name]
		if !ok {
			t.Errorf("TriggerAuthentication %s: parameter %s reads Secret %s, not rendered", ta.Name, r.Parameter, r.Name)
			continue
		}
		if len(s.Data[r.Key]) == 0 {
			t.Errorf("TriggerAuthentication %s: Secret %s has no key %s", ta.Name, r.Name, r.Key)
		}
	}
	want := []string{"caCert"}
	if sc.TLSClientCAFile != "" {
		want = append(want, "tlsClientCert", "tlsClientKey")
	}
	if diff := cmp.Diff(want, params); diff != "" {
		t.Errorf("TriggerAuthentication %s parameters (-want +got):\n%s", ta.Name, diff)
	}
}

// TestScalerDeployment: hardened pod, probes on the gRPC health service, config the scaler's
// own Validate accepts.
func TestScalerDeployment(t *testing.T) {
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			o := renderObjects(t, rc)
			d := o.deployments[scalerName]
			cfg := scalerConfig(t, d)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("scaler rejects the chart's flags: %v", err)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
				t.Errorf("scaler replicas %v, want 1 by default", d.Spec.Replicas)
			}
			spec := d.Spec.Template.Spec
			c := spec.Containers[0]
			psc, sc := spec.SecurityContext, c.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
				t.Error("scaler pod is not runAsNonRoot")
			}
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("scaler container security context %+v is not hardened", sc)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("scaler resources %+v: want a CPU request and a memory limit", c.Resources)
			}
			// The informers watch what the RBAC allows: the release namespace, or every
			// namespace with a ClusterRole (TestRBACExact).
			if wantNS := map[bool]string{false: namespace, true: ""}[rc.sharedScaler]; cfg.WatchNamespace != wantNS {
				t.Errorf("scaler --watch-namespace %q, want %q", cfg.WatchNamespace, wantNS)
			}
			// GOMEMLIMIT is the Go runtime's soft limit; the binary's mapped pages (≈ 20 MiB
			// RSS, docs/scaler.md) come on top, so it must leave that much under the limit.
			gml, err := goMemLimit(c.Env)
			if err != nil {
				t.Fatal(err)
			}
			if limit := c.Resources.Limits.Memory().Value(); gml <= 0 || gml > limit-20<<20 {
				t.Errorf("scaler GOMEMLIMIT %d bytes with a %d-byte memory limit: want set and ≤ limit − 20 MiB", gml, limit)
			}
			rp := c.ReadinessProbe
			tls := cfg.TLSCertFile != ""
			switch {
			case !tls && (rp == nil || rp.GRPC == nil || fmt.Sprint(rp.GRPC.Port) != strings.TrimPrefix(cfg.Listen, ":")):
				t.Errorf("readiness %+v, want a gRPC probe on %s", rp, cfg.Listen)
			case tls && (rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/healthz"):
				t.Errorf("readiness with TLS %+v, want GET /healthz (kubelet gRPC probes are plaintext)", rp)
			}
			if lp := c.LivenessProbe; lp == nil || lp.HTTPGet == nil || lp.HTTPGet.Path != "/healthz" {
				t.Errorf("liveness %+v, want GET /healthz", lp)
			}
			if tls {
				for _, f := range []string{cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile} {
					if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return strings.HasPrefix(f, m.MountPath+"/") }) {
						t.Errorf("TLS file %s is not under a mounted volume", f)
					}
				}
			}
			pdb := o.pdbs[scalerName]
			if pdb == nil || !maps.Equal(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
				t.Errorf("PodDisruptionBudget does not select the scaler's pods")
			}
			// helm test runs the scaler's own image (no image this repository does not build) and
			// asks the same address KEDA dials.
			tp := o.testPods[scalerName+"-test-health"]
			if tp == nil || tp.Annotations["helm.sh/hook"] != "test" ||
				!slices.Contains(tp.Spec.Containers[0].Args, fmt.Sprintf("--health-probe=%s.%s.svc%s", scalerName, namespace, cfg.Listen)) {
				t.Fatalf("helm test pod %+v does not probe the scaler's address", tp)
			}
			if got, want := tp.Spec.Containers[0].Image, c.Image; got != want {
				t.Errorf("helm test pod image %q, want the scaler's %q", got, want)
			}
			if tls && !slices.Contains(tp.Spec.Containers[0].Args, "--health-probe-ca-file=/etc/inferscale/tls/ca.crt") {
				t.Errorf("helm test pod args %q: with TLS, want --health-probe-ca-file", tp.Spec.Containers[0].Args)
			}
		})
	}
}

// TestPools: GPU resources, and catalogs the sidecar's own parser accepts with a peak for the
// pod's profile for every model.
func TestPools(t *testing.T) {
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			o := renderObjects(t, rc)
			for _, d := range o.deployments {
				if d.Labels["app.kubernetes.io/component"] != "pool" {
					continue
				}
				spec := d.Spec.Template.Spec
				gpu := false
				for name, q := range spec.Containers[0].Resources.Limits {
					gpu = gpu || (strings.HasPrefix(string(name), "nvidia.com/") && q.Value() > 0)
				}
				if !gpu {
					t.Errorf("%s: no nvidia.com/ GPU or MIG limit on %s", d.Name, spec.Containers[0].Name)
				}
				sc, ok := sidecar(spec)
				if !ok {
					continue
				}
				cm := o.configMaps[d.Name+"-catalog"]
				if cm == nil {
					t.Fatalf("%s: no catalog ConfigMap", d.Name)
				}
				cat, err := residency.ParseCatalog([]byte(cm.Data["catalog.yaml"]))
				if err != nil {
					t.Fatalf("%s: the sidecar rejects the catalog: %v", d.Name, err)
				}
				profile := argMap(sc.Args)["mig-profile"]
				if un := cat.Unplaceable(profile); profile == "" || len(un) > 0 {
					t.Errorf("%s: profile %q; catalog models without a peak for it: %v", d.Name, profile, un)
				}
				mounted := slices.ContainsFunc(sc.VolumeMounts, func(m corev1.VolumeMount) bool {
					return m.Name == "catalog" && argMap(sc.Args)["catalog"] == m.MountPath+"/catalog.yaml"
				})
				vol := slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
					return v.Name == "catalog" && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name
				})
				if !mounted || !vol {
					t.Errorf("%s: --catalog=%s is not the mounted ConfigMap %s", d.Name, argMap(sc.Args)["catalog"], cm.Name)
				}
			}
		})
	}
}

// TestSidecarFlags parses every rendered sidecar command line with cmd/residency's own flags
// and residency.Config.Validate.
func TestSidecarFlags(t *testing.T) {
	decls := residencyFlagDecls(t)
	forEachSidecar(t, func(t *testing.T, d *appsv1.Deployment, sc corev1.Container) {
		if err := residencyConfig(t, decls, sc).Validate(); err != nil {
			t.Errorf("%s: the sidecar rejects the chart's flags: %v", d.Name, err)
		}
	})
}

// TestPoolPorts pins which container serves each of a pool's ports. With the sidecar, the
// inference front serves the pool's HTTP and gRPC ports (the Service's targets), Triton's own
// HTTP and gRPC move to +100 (gRPC on the loopback; HTTP on every address, for the kubelet's
// startup and liveness probes, in no Service). Without it Triton or vLLM serves them itself.
func TestPoolPorts(t *testing.T) {
	type want struct {
		ports       map[string]map[string]int32 // container -> port name -> containerPort
		engineArgs  map[string]string           // Triton's port flags; nil for vLLM
		sidecarArgs map[string]string           // the sidecar's front flags; nil without it
		probePort   string                      // the engine's startup and liveness probe port
		service     map[string]int32            // Service port name (= targetPort) -> port
	}
	tritonFlags := []string{"http-port", "grpc-port", "grpc-address", "metrics-port"}
	frontFlags := []string{"triton-address", "inference-listen", "inference-http-listen", "triton-http-url"}
	tests := []struct {
		name string
		give map[string]any
		pool string
		want want
	}{
		{
			name: "triton with the sidecar",
			give: map[string]any{"pools": []any{minimalPool()}},
			pool: "rel-inferscale-p",
			want: want{
				ports: map[string]map[string]int32{
					"triton":    {"triton-http": 8100, "metrics": 8002},
					"residency": {"residency": 8090, "http": 8000, "grpc": 8001},
				},
				engineArgs: map[string]string{"http-port": "8100", "grpc-port": "8101", "grpc-address": "127.0.0.1", "metrics-port": "8002"},
				sidecarArgs: map[string]string{
					"triton-address": "127.0.0.1:8101", "inference-listen": ":8001",
					"inference-http-listen": ":8000", "triton-http-url": "http://127.0.0.1:8100",
				},
				probePort: "triton-http",
				service:   map[string]int32{"http": 8000, "grpc": 8001},
			},
		},
		{
			name: "triton with the sidecar as a plain container, other ports",
			give: map[string]any{
				"residency": map[string]any{"nativeSidecar": false},
				"pools":     []any{tritonPool("p", map[string]any{"ports": map[string]any{"http": 9000, "grpc": 9001, "metrics": 9002}})},
			},
			pool: "rel-inferscale-p",
			want: want{
				ports: map[string]map[string]int32{
					"triton":    {"triton-http": 9100, "metrics": 9002},
					"residency": {"residency": 8090, "http": 9000, "grpc": 9001},
				},
				engineArgs: map[string]string{"http-port": "9100", "grpc-port": "9101", "grpc-address": "127.0.0.1", "metrics-port": "9002"},
				sidecarArgs: map[string]string{
					"triton-address": "127.0.0.1:9101", "inference-listen": ":9001",
					"inference-http-listen": ":9000", "triton-http-url": "http://127.0.0.1:9100",
				},
				probePort: "triton-http",
				service:   map[string]int32{"http": 9000, "grpc": 9001},
			},
		},
		{
			// Without the sidecar nothing is at +100, so ports.http + 100 may be the metrics port.
			name: "triton without the sidecar, ports.http + 100 on the metrics port",
			give: map[string]any{"pools": []any{tritonPool("p", map[string]any{
				"residency": map[string]any{"enabled": false}, "ports": map[string]any{"http": 7902}})}},
			pool: "rel-inferscale-p",
			want: want{
				ports:      map[string]map[string]int32{"triton": {"http": 7902, "grpc": 8001, "metrics": 8002}},
				engineArgs: map[string]string{"http-port": "7902", "grpc-port": "8001", "metrics-port": "8002"},
				probePort:  "http",
				service:    map[string]int32{"http": 7902, "grpc": 8001},
			},
		},
		{
			name: "vllm",
			give: map[string]any{"pools": []any{vllmPool("llama")}},
			pool: "rel-inferscale-llama",
			want: want{
				ports:     map[string]map[string]int32{"engine": {"http": 8000}},
				probePort: "http",
				service:   map[string]int32{"http": 8000},
			},
		},
	}
	pick := func(args []string, keys []string) map[string]string {
		all, m := argMap(args), map[string]string{}
		for _, k := range keys {
			if v, ok := all[k]; ok {
				m[k] = v
			}
		}
		return m
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rel, err := render(t, tt.give)
			if err != nil {
				t.Fatal(err)
			}
			o, err := decodeRelease(rel)
			if err != nil {
				t.Fatal(err)
			}
			d := o.deployments[tt.pool]
			if d == nil {
				t.Fatalf("no Deployment %s among %v", tt.pool, o.kinds)
			}
			spec := d.Spec.Template.Spec
			var got want
			got.ports = map[string]map[string]int32{}
			for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
				got.ports[c.Name] = map[string]int32{}
				for _, p := range c.Ports {
					got.ports[c.Name][p.Name] = p.ContainerPort
				}
			}
			eng := spec.Containers[0]
			if tr, ok := container(spec.Containers, "triton"); ok {
				got.engineArgs = pick(tr.Args, tritonFlags)
			}
			if sc, ok := sidecar(spec); ok {
				got.sidecarArgs = pick(sc.Args, frontFlags)
			}
			if sp, lp := eng.StartupProbe, eng.LivenessProbe; sp != nil && lp != nil && sp.HTTPGet != nil && lp.HTTPGet != nil && sp.HTTPGet.Port == lp.HTTPGet.Port {
				got.probePort = sp.HTTPGet.Port.String()
			}
			svc := o.services[tt.pool]
			if svc == nil {
				t.Fatalf("no Service %s among %v", tt.pool, o.kinds)
			}
			got.service = map[string]int32{}
			for _, p := range svc.Spec.Ports {
				if p.TargetPort.String() != p.Name {
					t.Errorf("Service port %s: targetPort %s, want the container port of that name", p.Name, p.TargetPort.String())
				}
				got.service[p.Name] = p.Port
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tt.pool, diff)
			}
		})
	}
}

// TestTritonExample pins what the Triton example promises: 1g.10gb slices, one pinned
// embedding model and a long P2 tail that fits the slice only in part.
func TestTritonExample(t *testing.T) {
	o := renderObjects(t, renderCases[1])
	d := o.deployments["rel-inferscale-embed"]
	tr, _ := container(d.Spec.Template.Spec.Containers, "triton")
	if q := tr.Resources.Limits["nvidia.com/mig-1g.10gb"]; q.Value() != 1 {
		t.Errorf("triton limit nvidia.com/mig-1g.10gb = %v, want 1", q.String())
	}
	cat, err := residency.ParseCatalog([]byte(o.configMaps["rel-inferscale-embed-catalog"].Data["catalog.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[plan.Tier][]string{}
	var total int64
	for _, m := range cat.Models {
		tiers[m.Tier] = append(tiers[m.Tier], m.Name)
		p, _ := m.Peak("1g.10gb")
		total += p
	}
	if diff := cmp.Diff([]string{"text-embedding-bge-small"}, tiers[plan.TierP0]); diff != "" {
		t.Errorf("P0 models (-want +got):\n%s", diff)
	}
	if len(tiers[plan.TierP2]) < 5 {
		t.Errorf("P2 tail %v: want at least 5 models", tiers[plan.TierP2])
	}
	// The tail must not fit all at once, or residency has nothing to decide.
	budget, _ := plan.ProfileBytes("1g.10gb")
	if total <= budget-cat.ReserveBytes {
		t.Errorf("all models (%d bytes) fit in the 1g.10gb budget %d: the example shows no eviction", total, budget-cat.ReserveBytes)
	}
}

// TestPodRegex: {{ .pool.podRegex }} in a query selects exactly the pool's pods (PromQL
// anchors regex matchers at both ends), not another pool whose name extends this one's.
func TestPodRegex(t *testing.T) {
	o := renderObjects(t, renderCases[1])
	q := o.scaledObjects["rel-inferscale-embed"].Spec.Triggers[0].Metadata["queueQuery"]
	m := regexp.MustCompile(`pod=~"([^"]+)"`).FindStringSubmatch(q)
	if m == nil {
		t.Fatalf("queueQuery %q has no pod regex", q)
	}
	re := regexp.MustCompile("^(?:" + m[1] + ")$")
	tests := []struct {
		pod  string
		want bool
	}{
		{pod: "rel-inferscale-embed-7d9f8c6b5d-x2x9q", want: true},
		{pod: "rel-inferscale-embed-5c4b-abcde", want: true},
		{pod: "rel-inferscale-embed-v2-7d9f8c6b5d-x2x9q", want: false},
		{pod: "rel-inferscale-scaler-7d9f8c6b5d-x2x9q", want: false},
		{pod: "other-rel-inferscale-embed-7d9f8c6b5d-x2x9q", want: false},
	}
	for _, tt := range tests {
		if got := re.MatchString(tt.pod); got != tt.want {
			t.Errorf("%s matches %q: %v, want %v", m[1], tt.pod, got, tt.want)
		}
	}
}

// TestScrapeTargets: every PodMonitor and ServiceMonitor selects rendered pods or Services and
// names ports they have; with annotations instead, prometheus.io/port is a declared port.
// (Monitors are unstructured, so these are the checks a typed decode would not make anyway.)
func TestScrapeTargets(t *testing.T) {
	for _, rc := range renderCases {
		t.Run(rc.name, func(t *testing.T) {
			o := renderObjects(t, rc)
			podPorts := func(spec corev1.PodSpec) map[string]int32 {
				ports := map[string]int32{}
				for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
					for _, p := range c.Ports {
						ports[p.Name] = p.ContainerPort
					}
				}
				return ports
			}
			for key, m := range o.monitors {
				sel, _, err := unstructured.NestedStringMap(m.Object, "spec", "selector", "matchLabels")
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if len(sel) == 0 {
					t.Fatalf("%s: empty selector", key)
				}
				field := "podMetricsEndpoints"
				if strings.HasPrefix(key, "ServiceMonitor/") {
					field = "endpoints"
				}
				eps, _, err := unstructured.NestedSlice(m.Object, "spec", field)
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if len(eps) == 0 {
					t.Fatalf("%s: no %s", key, field)
				}
				matched := 0
				check := func(labels map[string]string, ports map[string]int32) {
					for k, v := range sel {
						if labels[k] != v {
							return
						}
					}
					matched++
					for _, ep := range eps {
						port, _ := ep.(map[string]any)["port"].(string)
						if _, ok := ports[port]; !ok {
							t.Errorf("%s: endpoint port %q is not among %v", key, port, slices.Sorted(mapKeys(ports)))
						}
					}
				}
				if field == "endpoints" {
					for _, s := range o.services {
						ports := map[string]int32{}
						for _, p := range s.Spec.Ports {
							ports[p.Name] = p.Port
						}
						check(s.Labels, ports)
					}
				} else {
					for _, d := range o.deployments {
						check(d.Spec.Template.Labels, podPorts(d.Spec.Template.Spec))
					}
				}
				if matched == 0 {
					t.Errorf("%s: selector %v matches nothing the chart renders", key, sel)
				}
			}
			for _, d := range o.deployments {
				a := d.Spec.Template.Annotations
				if a["prometheus.io/scrape"] != "true" {
					continue
				}
				port := a["prometheus.io/port"]
				if !slices.ContainsFunc(slices.Collect(maps.Values(podPorts(d.Spec.Template.Spec))), func(p int32) bool { return fmt.Sprint(p) == port }) {
					t.Errorf("%s: prometheus.io/port %q is not a container port", d.Name, port)
				}
			}
		})
	}
}

// goMemLimit reads the GOMEMLIMIT of a container's env in bytes (Go's syntax: a number with an
// optional B, KiB, MiB, GiB or TiB suffix); 0 when it is not set.
func goMemLimit(env []corev1.EnvVar) (int64, error) {
	i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" })
	if i < 0 {
		return 0, nil
	}
	v := env[i].Value
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}, {"", 0}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			x, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("GOMEMLIMIT %q: want a number with an optional B, KiB, MiB, GiB or TiB suffix", v)
			}
			return x << u.shift, nil
		}
	}
	return 0, nil
}
