package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ids"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/proto/sluicepb"
	"github.com/sluicehq/sluice/wire/rpcauth"
)

// DriverOptions configure the driver's cluster service.
type DriverOptions struct {
	// Listen is the address to serve on (default 127.0.0.1:7077).
	Listen string
	// Token is the cluster token every peer must present ("" disables).
	Token string
	// Roles holds the CLI's viewer and operator credentials (nil: none;
	// then the cluster credential has every right on the ControlService).
	Roles *rpcauth.Roles
	// TLS is the certificate source (nil: plaintext). With a CA it is
	// mutual: executors and the CLI must present certificates it signed.
	TLS *tlsconf.Source
	// Insecure accepts a non-loopback Listen with no authentication (it
	// logs a warning).
	Insecure bool
	// HeartbeatTimeout removes an executor silent for longer (default 5s);
	// executors heartbeat every HeartbeatTimeout/5.
	HeartbeatTimeout time.Duration
	Logger           *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Control, if set, serves the CLI's ControlService (the driver
	// service); without it the service answers Unimplemented.
	Control sluicepb.ControlServiceServer
}

// DefaultDriverListen is the driver's default address: loopback only.
const DefaultDriverListen = "127.0.0.1:7077"

// Driver is the driver process's cluster side: the gRPC server executors
// (and the CLI) call, the membership it keeps, and connections to
// executors.
type Driver struct {
	opts    DriverOptions
	lis     net.Listener
	srv     *grpc.Server
	Members *Membership
	pool    *rpcauth.Pool
}

// NewDriver listens on opts.Listen; Serve serves.
func NewDriver(opts DriverOptions) (*Driver, error) {
	if opts.Listen == "" {
		opts.Listen = DefaultDriverListen
	}
	if opts.HeartbeatTimeout <= 0 {
		opts.HeartbeatTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := rpcauth.CheckListen(opts.Listen, opts.Token, opts.TLS, opts.Insecure, opts.Logger); err != nil {
		return nil, err
	}
	serverTLS, clientTLS, err := rpcauth.Transport(opts.TLS)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", opts.Listen, err)
	}
	d := &Driver{opts: opts, lis: lis, pool: rpcauth.NewPool(opts.Token, clientTLS, rpcauth.PeerDialOptions(opts.TLS)...)}
	d.Members = NewMembership(opts.HeartbeatTimeout, opts.Logger, func(m Member) { d.pool.Drop(m.Address) })
	auth := &rpcauth.Authenticator{Token: opts.Token, Roles: opts.Roles, Mutual: opts.TLS != nil && opts.TLS.Mutual()}
	d.srv = grpc.NewServer(rpcauth.DriverServerOptions(auth, serverTLS, opts.Logger)...)
	sluicepb.RegisterDriverServiceServer(d.srv, &driverService{d: d})
	// Registered either way, so a call without credentials is refused as
	// unauthenticated before it learns whether the service is served.
	control := opts.Control
	if control == nil {
		control = sluicepb.UnimplementedControlServiceServer{}
	}
	sluicepb.RegisterControlServiceServer(d.srv, control)
	return d, nil
}

// Addr returns the address the driver listens on.
func (d *Driver) Addr() string { return d.lis.Addr().String() }

// Serve serves until ctx ends, expiring silent executors, then stops.
func (d *Driver) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- d.srv.Serve(d.lis) }()
	tick := time.NewTicker(d.opts.HeartbeatTimeout / 5)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			d.stop()
			<-errc
			return nil
		case err := <-errc:
			d.pool.Close()
			if errors.Is(err, grpc.ErrServerStopped) {
				return nil
			}
			return fmt.Errorf("serve driver: %w", err)
		case <-tick.C:
			d.Members.Expire(d.opts.Now())
		}
	}
}

func (d *Driver) stop() {
	done := make(chan struct{})
	go func() { d.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		d.srv.Stop()
	}
	d.pool.Close()
}

// executorClient returns the ExecutorService client of m.
func (d *Driver) executorClient(m Member) (sluicepb.ExecutorServiceClient, error) {
	c, err := d.pool.Conn(m.Address)
	if err != nil {
		return nil, err
	}
	return sluicepb.NewExecutorServiceClient(c), nil
}

type driverService struct {
	sluicepb.UnimplementedDriverServiceServer
	d *Driver
}

func (s *driverService) Register(ctx context.Context, req *sluicepb.RegisterRequest) (*sluicepb.RegisterResponse, error) {
	if _, _, err := net.SplitHostPort(req.Address); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "register: address %q is not host:port", req.Address)
	}
	m := s.d.Members.Register(s.d.opts.Now(), req.Address, req.Name, int(req.Slots))
	return &sluicepb.RegisterResponse{ExecutorId: string(m.ID), HeartbeatIntervalMs: (s.d.opts.HeartbeatTimeout / 5).Milliseconds()}, nil
}

func (s *driverService) Heartbeat(ctx context.Context, req *sluicepb.HeartbeatRequest) (*sluicepb.HeartbeatResponse, error) {
	return &sluicepb.HeartbeatResponse{Known: s.d.Members.Heartbeat(s.d.opts.Now(), ids.ExecutorID(req.ExecutorId), req.Address)}, nil
}

func (s *driverService) Deregister(ctx context.Context, req *sluicepb.DeregisterRequest) (*sluicepb.DeregisterResponse, error) {
	if err := s.d.Members.Drain(ctx, ids.ExecutorID(req.ExecutorId)); err != nil {
		return nil, status.Error(codes.DeadlineExceeded, err.Error())
	}
	return &sluicepb.DeregisterResponse{}, nil
}
