package localcluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criClient talks to a container runtime's CRI socket (containerd's, for the real node).
type criClient struct {
	conn *grpc.ClientConn
	rt   runtimeapi.RuntimeServiceClient
}

func dialCRI(_ context.Context, socket string) (*criClient, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &criClient{conn: conn, rt: runtimeapi.NewRuntimeServiceClient(conn)}, nil
}

func (c *criClient) close() { _ = c.conn.Close() }

// version asks the runtime its name and version: it answers once CRI serves.
func (c *criClient) version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return "", err
	}
	return v.RuntimeName + " " + v.RuntimeVersion, nil
}

// removeSandboxes stops every container of the runtime at socket, grace (a SIGTERM, then a
// SIGKILL after grace) for all at once, then stops and removes every Pod sandbox, which
// releases their network (CNI DEL) and mounts.
func removeSandboxes(ctx context.Context, socket string, grace time.Duration) error {
	c, err := dialCRI(ctx, socket)
	if err != nil {
		return err
	}
	defer c.close()
	containers, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, ctr := range containers.Containers {
		if ctr.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctr.Id, Timeout: int64(grace / time.Second)})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stopping container %s: %w", ctr.Metadata.GetName(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sandboxes, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, sb := range sandboxes.Items {
		if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping pod %s/%s: %w", sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err))
			continue
		}
		if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing pod %s/%s: %w", sb.Metadata.GetNamespace(), sb.Metadata.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// pullImages has the runtime at socket pull each image (a reference it resolves, e.g.
// "docker.io/library/postgres:15"); one it already holds costs a lookup.
func pullImages(ctx context.Context, socket string, images ...string) error {
	c, err := dialCRI(ctx, socket)
	if err != nil {
		return err
	}
	defer c.close()
	is := runtimeapi.NewImageServiceClient(c.conn)
	for _, img := range images {
		if _, err := is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}}); err != nil {
			return fmt.Errorf("pulling %s: %w", img, err)
		}
	}
	return nil
}
