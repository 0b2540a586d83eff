package main

import (
	_ "github.com/kedacore/keda/v2/pkg/scalers/externalscaler"
	_ "github.com/prometheus/prometheus/promql/parser"
	_ "github.com/prometheus/client_golang/api/prometheus/v1"
	_ "k8s.io/client-go/dynamic/dynamicinformer"
	_ "k8s.io/client-go/informers"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	_ "helm.sh/helm/v3/pkg/action"
	_ "helm.sh/helm/v3/pkg/lint"
	_ "github.com/kedacore/keda/v2/apis/keda/v1alpha1"
	_ "google.golang.org/grpc/health"
	_ "google.golang.org/grpc/reflection"
)
func main(){}
