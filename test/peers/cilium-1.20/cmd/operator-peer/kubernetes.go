package main

import (
	"context"
	"errors"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cilium/cilium/operator/pkg/ipam/allocator"
	"github.com/cilium/cilium/pkg/annotation"
	v2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium/cilium/pkg/k8s/client/clientset/versioned"
	"github.com/cilium/cilium/pkg/k8s/client/informers/externalversions"
)

type kubernetes struct{ clientset *versioned.Clientset }

// newKubernetes builds cilium's generated clientset with the peer's own token and the operator's
// client rate limits.
func newKubernetes(s settings) (kubernetes, error) {
	config := &rest.Config{
		Host:            s.kubernetesURL,
		BearerToken:     s.kubernetesToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.kubernetesCAFile},
		QPS:             operatorK8sClientQPS,
		Burst:           operatorK8sClientBurst,
		UserAgent:       "cilium-operator-aws/v1.20.2 (operator-peer)",
	}
	clientset, err := versioned.NewForConfig(config)
	return kubernetes{clientset}, err
}

func (k kubernetes) getterUpdater() allocator.CiliumNodeGetterUpdater {
	return ciliumNodeGetterUpdater{k.clientset}
}

// watchCiliumNodes feeds the node manager as operator/pkg/ipam/nodewatcher.go does: every add and
// update is an Upsert unless the node carries the IPAM ignore annotation, every delete a Delete.
// It returns once the informer has synced; the handlers run until ctx ends.
func (k kubernetes) watchCiliumNodes(ctx context.Context, handler allocator.NodeEventHandler) error {
	factory := externalversions.NewSharedInformerFactory(k.clientset, 0)
	informer := factory.Cilium().V2().CiliumNodes().Informer()
	upsert := func(obj any) {
		node, ok := obj.(*v2.CiliumNode)
		if !ok {
			return
		}
		value, ignored := node.Annotations[annotation.IPAMIgnore]
		if !ignored || strings.ToLower(value) != "true" {
			handler.Upsert(node)
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, obj any) { upsert(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if node, ok := obj.(*v2.CiliumNode); ok {
				handler.Delete(node)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return errors.New("the CiliumNode informer did not sync")
	}
	return nil
}

// ciliumNodeGetterUpdater is the operator's ciliumNodeUpdateImplementation
// (operator/pkg/ipam/nodewatcher.go): an update is skipped when the part it writes is unchanged.
type ciliumNodeGetterUpdater struct{ clientset *versioned.Clientset }

func (c ciliumNodeGetterUpdater) Create(node *v2.CiliumNode) (*v2.CiliumNode, error) {
	return c.clientset.CiliumV2().CiliumNodes().Create(context.TODO(), node, metav1.CreateOptions{})
}

func (c ciliumNodeGetterUpdater) Get(name string) (*v2.CiliumNode, error) {
	return c.clientset.CiliumV2().CiliumNodes().Get(context.TODO(), name, metav1.GetOptions{})
}

func (c ciliumNodeGetterUpdater) UpdateStatus(orig, node *v2.CiliumNode) (*v2.CiliumNode, error) {
	if orig == nil || !orig.Status.DeepEqual(&node.Status) {
		return c.clientset.CiliumV2().CiliumNodes().UpdateStatus(context.TODO(), node, metav1.UpdateOptions{})
	}
	return nil, nil
}

func (c ciliumNodeGetterUpdater) Update(orig, node *v2.CiliumNode) (*v2.CiliumNode, error) {
	if orig == nil || !orig.Spec.DeepEqual(&node.Spec) {
		return c.clientset.CiliumV2().CiliumNodes().Update(context.TODO(), node, metav1.UpdateOptions{})
	}
	return nil, nil
}
