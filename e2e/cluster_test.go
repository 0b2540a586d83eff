//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

const (
	kedaNamespace      = "keda"
	kedaAPIServiceName = "keda-metrics-apiserver"
	nodeName           = "e2e-node"
)

// binaries are the paths of every executable the suite runs.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler string
	kedaOperator, kedaAdapter                     string
	prometheus                                    string
	scaler, tritonfake, residency                 string
}

// cluster is a loopback control plane: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, KEDA operator and adapter.
type cluster struct {
	dir    string // scratch: PKI, data, kubeconfig
	logDir string
	bins   binaries
	pki    *pki

	kubeconfig string
	rest       *rest.Config
	kube       kubernetes.Interface
	dyn        dynamic.Interface

	procs []*proc // in start order; stopped in reverse

	kedaMetricsAddr string // operator's gRPC metrics service, host:port
	stopHeartbeat   context.CancelFunc
	heartbeatDone   chan struct{}
}

// startCluster brings the control plane up and returns once KEDA's
// external-metrics APIService is Available and the fake node is schedulable.
func startCluster(ctx context.Context, dir, logDir string, bins binaries) (c *cluster, err error) {
	c = &cluster{dir: dir, logDir: logDir, bins: bins}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	if c.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return c, fmt.Errorf("pki: %w", err)
	}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"etcd", c.startEtcdAndAPIServer},
		{"kube-controller-manager", c.startControllerManager},
		{"kube-scheduler", c.startScheduler},
		{"node", c.registerNode},
		{"keda", c.startKEDA},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.fn(ctx); err != nil {
			return c, fmt.Errorf("start %s: %w", s.name, err)
		}
		logf("cluster: %s up in %v", s.name, time.Since(start).Round(time.Millisecond))
	}
	return c, nil
}

func (c *cluster) start(name, bin string, args, env []string) (*proc, error) {
	p, err := startProc(c.logDir, name, bin, args, env)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// stop ends every process in reverse start order: KEDA, scheduler,
// controller-manager, apiserver, and etcd last (an apiserver whose etcd is
// gone hangs in shutdown).
func (c *cluster) stop() {
	if c.stopHeartbeat != nil {
		c.stopHeartbeat()
		<-c.heartbeatDone
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(10 * time.Second)
	}
	c.procs = nil
}

// dumpLogs prints the tail of every component log; called on failure.
func (c *cluster) dumpLogs(lines int) {
	names, _ := filepath.Glob(filepath.Join(c.logDir, "*.log"))
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "\n===== %s (last %d lines) =====\n%s\n", n, lines, tailFile(n, lines))
	}
}

func (c *cluster) startEtcdAndAPIServer(ctx context.Context) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	etcd, err := c.start("etcd", c.bins.etcd, []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.dir, "etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--unsafe-no-fsync", "--log-level=warn",
	}, nil)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "etcd", etcd, time.Minute, 100*time.Millisecond, httpOK(plainClient, client+"/health")); err != nil {
		return err
	}

	p := c.pki
	api := "https://127.0.0.1:" + strconv.Itoa(ports[2])
	apiserver, err := c.start("kube-apiserver", c.bins.apiserver, []string{
		"--etcd-servers=" + client,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + filepath.Join(c.dir, "apiserver"),
		"--tls-cert-file=" + p.apiserverCert, "--tls-private-key-file=" + p.apiKey,
		"--client-ca-file=" + p.caCert,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		// Loopback necessities: no kubernetes Endpoints for 127.0.0.1, and
		// the aggregator dials the APIService's Service name, not endpoints.
		"--endpoint-reconciler-type=none",
		"--enable-aggregator-routing=false",
		// Aggregation (request-header authentication of the front proxy).
		"--requestheader-client-ca-file=" + p.frontCA,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontCert, "--proxy-client-key-file=" + p.frontKey,
		"--profiling=false",
	}, nil)
	if err != nil {
		return err
	}
	if err := c.writeKubeconfig(api); err != nil {
		return err
	}
	adminTLS, err := tls.X509KeyPair(p.adminCertPEM, p.adminPEM)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	adminHTTP := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{adminTLS}, RootCAs: roots, MinVersion: tls.VersionTLS12,
	}}}
	if err := waitFor(ctx, "kube-apiserver", apiserver, 2*time.Minute, 250*time.Millisecond, httpOK(adminHTTP, api+"/readyz")); err != nil {
		return err
	}
	// The first ServiceAccount signer and system RBAC are bootstrapped by
	// post-start hooks that /readyz waits for; nothing more to do.
	return nil
}

func (c *cluster) writeKubeconfig(server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.pki.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.pki.adminCertPEM, ClientKeyData: c.pki.adminPEM}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "admin"}
	cfg.CurrentContext = "e2e"
	c.kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, c.kubeconfig); err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 100, 200
	c.rest = rc
	if c.kube, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	c.dyn, err = dynamic.NewForConfig(rc)
	return err
}

// delegated are the flags every component that serves HTTPS on its own
// needs to authenticate and authorize callers through the apiserver.
func (c *cluster) delegated() []string {
	return []string{
		"--kubeconfig=" + c.kubeconfig,
		"--authentication-kubeconfig=" + c.kubeconfig,
		"--authorization-kubeconfig=" + c.kubeconfig,
	}
}

func (c *cluster) startControllerManager(ctx context.Context) error {
	port := freePort()
	args := append(c.delegated(),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.dir, "kcm"),
		"--leader-elect=false",
		"--controllers=deployment-controller,replicaset-controller,horizontal-pod-autoscaler-controller,"+
			"serviceaccount-controller,serviceaccount-token-controller,namespace-controller,"+
			"garbage-collector-controller,node-lifecycle-controller",
		"--service-account-private-key-file="+c.pki.saKey,
		"--root-ca-file="+c.pki.caCert,
		"--horizontal-pod-autoscaler-sync-period=5s",
		// The harness renews the node's Lease every 5 s; keep the default
		// grace so a slow machine never marks the node NotReady.
		"--concurrent-deployment-syncs=2",
	)
	p, err := c.start("kube-controller-manager", c.bins.controllerManager, args, nil)
	if err != nil {
		return err
	}
	return waitFor(ctx, "kube-controller-manager", p, 2*time.Minute, 250*time.Millisecond,
		httpOK(insecureClient, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz"))
}

func (c *cluster) startScheduler(ctx context.Context) error {
	port := freePort()
	args := append(c.delegated(),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.dir, "scheduler"),
		"--leader-elect=false",
	)
	p, err := c.start("kube-scheduler", c.bins.scheduler, args, nil)
	if err != nil {
		return err
	}
	return waitFor(ctx, "kube-scheduler", p, 2*time.Minute, 250*time.Millisecond,
		httpOK(insecureClient, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz"))
}

// gvr of the objects handled through the dynamic client.
var (
	gvrCRD         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	gvrAPIService  = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	gvrScaledObj   = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "scaledobjects"}
	gvrTriggerAuth = schema.GroupVersionResource{Group: "keda.sh", Version: "v1alpha1", Resource: "triggerauthentications"}
)

// kedaCRDDir is config/crd/bases of the KEDA module the wrapper pins.
func kedaCRDDir() (string, error) {
	modcache := os.Getenv("GOMODCACHE")
	if modcache == "" {
		out, err := goEnv("GOMODCACHE")
		if err != nil {
			return "", err
		}
		modcache = out
	}
	dir := filepath.Join(modcache, "github.com", "kedacore", "keda", "v2@"+kedaVersion, "config", "crd", "bases")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("KEDA CRDs: %w (run e2e/tools/build.sh, which downloads the module)", err)
	}
	return dir, nil
}

func (c *cluster) applyCRDs(ctx context.Context) error {
	dir, err := kedaCRDDir()
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := c.dyn.Resource(gvrCRD).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	for _, n := range names {
		err := waitFor(ctx, "CRD "+n, nil, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
			u, err := c.dyn.Resource(gvrCRD).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if conditionTrue(u, "Established") {
				return nil
			}
			return errNotReady
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// conditionTrue reports whether status.conditions has type=t with status True.
func conditionTrue(u *unstructured.Unstructured, t string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == t && m["status"] == "True" {
			return true
		}
	}
	return false
}

func (c *cluster) startKEDA(ctx context.Context) error {
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kedaNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := c.applyCRDs(ctx); err != nil {
		return err
	}
	if os.Getenv("INFERSCALE_E2E_SKIP_KEDA") == "1" { // harness debugging: CRDs only
		return nil
	}
	ports, err := freePorts(5)
	if err != nil {
		return err
	}
	env := []string{
		"WATCH_NAMESPACE=", "KEDA_CLUSTER_OBJECT_NAMESPACE=" + kedaNamespace, "POD_NAMESPACE=" + kedaNamespace,
		"KUBECONFIG=" + c.kubeconfig,
	}
	c.kedaMetricsAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
	operator, err := c.start("keda-operator", c.bins.kedaOperator, []string{
		"--kubeconfig=" + c.kubeconfig,
		"--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--metrics-service-bind-address=" + c.kedaMetricsAddr,
		"--cert-dir=" + c.pki.kedaDir,
		"--ca-dir=" + c.pki.kedaDir,
		"--enable-cert-rotation=false",
		"--zap-log-level=info", "--zap-encoder=console",
	}, env)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "keda-operator", operator, 2*time.Minute, 250*time.Millisecond,
		httpOK(plainClient, "http://127.0.0.1:"+strconv.Itoa(ports[1])+"/readyz")); err != nil {
		return err
	}

	kd := c.pki.kedaDir
	adapterPort := ports[3]
	adapter, err := c.start("keda-adapter", c.bins.kedaAdapter, append(c.delegated(),
		"--lister-kubeconfig="+c.kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(adapterPort),
		"--cert-dir="+kd,
		"--tls-cert-file="+filepath.Join(kd, "tls.crt"), "--tls-private-key-file="+filepath.Join(kd, "tls.key"),
		"--metrics-service-address="+c.kedaMetricsAddr,
		// The adapter's own /metrics listener takes a port only and binds
		// every interface; KEDA offers no host flag for it.
		"--port="+strconv.Itoa(ports[4]),
		"--zap-log-level=info", "--zap-encoder=console",
	), env)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, "keda-adapter", adapter, 2*time.Minute, 250*time.Millisecond,
		httpOK(insecureClient, "https://127.0.0.1:"+strconv.Itoa(adapterPort)+"/readyz")); err != nil {
		return err
	}
	return c.registerAPIService(ctx, adapterPort)
}

// registerAPIService points v1beta1.external.metrics.k8s.io at the adapter:
// an ExternalName Service resolving to localhost (Endpoints reject
// loopback addresses), verified with the cluster CA.
func (c *cluster) registerAPIService(ctx context.Context, port int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: kedaAPIServiceName, Namespace: kedaNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	if _, err := c.kube.CoreV1().Services(kedaNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Service %s: %w", kedaAPIServiceName, err)
	}
	apiSvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": "v1beta1.external.metrics.k8s.io"},
		"spec": map[string]any{
			"group":                "external.metrics.k8s.io",
			"version":              "v1beta1",
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
			"caBundle":             c.pki.caPEM,
			"service": map[string]any{
				"name": kedaAPIServiceName, "namespace": kedaNamespace, "port": int64(port),
			},
		},
	}}
	// caBundle is []byte in the API; JSON carries it base64-encoded.
	if err := unstructured.SetNestedField(apiSvc.Object, encodeBase64(c.pki.caPEM), "spec", "caBundle"); err != nil {
		return err
	}
	if _, err := c.dyn.Resource(gvrAPIService).Create(ctx, apiSvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create APIService: %w", err)
	}
	return waitFor(ctx, "APIService v1beta1.external.metrics.k8s.io", nil, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		u, err := c.dyn.Resource(gvrAPIService).Get(ctx, "v1beta1.external.metrics.k8s.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if conditionTrue(u, "Available") {
			return nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return fmt.Errorf("%w: %v", errNotReady, conds)
	})
}

// registerNode creates the node the harness's kubelet stands in for, with
// room for the pool (CPU, memory and the GPU resources the chart may
// request), and keeps its Lease renewed so node-lifecycle keeps it Ready.
func (c *cluster) registerNode(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{
		"kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
	}}}
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := c.heartbeat(ctx); err != nil {
		return err
	}
	hbCtx, cancel := context.WithCancel(context.Background())
	c.stopHeartbeat, c.heartbeatDone = cancel, make(chan struct{})
	go func() {
		defer close(c.heartbeatDone)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-t.C:
				if err := c.heartbeat(hbCtx); err != nil && hbCtx.Err() == nil {
					logf("node heartbeat: %v", err)
				}
			}
		}
	}()
	// node-lifecycle removes the not-ready taint the apiserver's admission
	// added at registration once it sees the Ready condition.
	return waitFor(ctx, "node "+nodeName+" untainted", nil, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		n, err := c.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(n.Spec.Taints) > 0 {
			return fmt.Errorf("%w: taints %v", errNotReady, n.Spec.Taints)
		}
		return nil
	})
}

// heartbeat writes the node's Ready status and renews its Lease.
func (c *cluster) heartbeat(ctx context.Context) error {
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return c.writeNodeStatus(ctx) }); err != nil {
		return err
	}
	return c.renewLease(ctx)
}

func (c *cluster) writeNodeStatus(ctx context.Context) error {
	now := metav1.Now()
	n, err := c.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	qty := resource.MustParse
	res := corev1.ResourceList{
		corev1.ResourceCPU: qty("64"), corev1.ResourceMemory: qty("256Gi"), corev1.ResourcePods: qty("110"),
		"nvidia.com/gpu": qty("64"),
	}
	for _, prof := range []string{"1g.10gb", "1g.12gb", "1g.18gb", "1g.24gb", "2g.20gb", "2g.24gb", "3g.40gb", "4g.40gb", "7g.80gb"} {
		res[corev1.ResourceName("nvidia.com/mig-"+prof)] = qty("64")
	}
	n.Status.Capacity, n.Status.Allocatable = res, res
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: nodeName}}
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "e2e harness plays the kubelet", LastHeartbeatTime: now, LastTransitionTime: now}
	found := false
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			cond.LastTransitionTime = n.Status.Conditions[i].LastTransitionTime
			n.Status.Conditions[i] = cond
			found = true
		}
	}
	if !found {
		n.Status.Conditions = append(n.Status.Conditions, cond)
	}
	if _, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node status: %w", err)
	}
	return nil
}

// encodeBase64 is the JSON form of a []byte field.
func encodeBase64(b []byte) string { return base64Std.EncodeToString(b) }

// goEnv runs `go env NAME`.
func goEnv(name string) (string, error) {
	out, err := runOutput("go", "env", name)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(out)
	if v == "" {
		return "", errors.New("go env " + name + " is empty")
	}
	return v, nil
}
