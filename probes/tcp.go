package probes

import (
	"context"
	"net"
	"strconv"
	"time"
)

// tcpProber runs tcpSocket probes.
type tcpProber struct{}

// probe opens a TCP connection to host:port within timeout: success if it opens, else a failure with the
// dial error ("dial tcp 10.88.0.5:81: connect: connection refused").
func (tcpProber) probe(ctx context.Context, host string, port int, timeout time.Duration) outcome {
	conn, err := dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
	if err != nil {
		return failure(err.Error())
	}
	_ = conn.Close()
	return success("")
}

// dial connects like the kubelet's probe dialer: the socket lingers 1 s at most on close, so frequent
// probes leave no pile of TIME-WAIT sockets. A zero timeout leaves the deadline to ctx.
func dial(ctx context.Context, network, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(1)
	}
	return conn, nil
}
