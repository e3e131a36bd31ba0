package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Dialer opens connections as a kgo client opens its own.
type Dialer struct {
	dial     func(ctx context.Context, network, host string) (net.Conn, error)
	sasls    []sasl.Mechanism
	clientID string
	hooks    []kgo.Hook
	timeout  time.Duration
}

// DialerOf returns a Dialer with cl's dialer (TLS included), SASL
// mechanisms, client id and hooks.
func DialerOf(cl *kgo.Client) Dialer {
	d := Dialer{clientID: "kgo", timeout: 10 * time.Second}
	if fn, ok := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error)); ok && fn != nil {
		d.dial = fn
	} else {
		d.dial = (&net.Dialer{}).DialContext
	}
	if ms, ok := cl.OptValue(kgo.SASL).([]sasl.Mechanism); ok {
		d.sasls = ms
	}
	if id := cl.OptValues(kgo.ClientID); len(id) == 2 && id[1] == true {
		d.clientID, _ = id[0].(string)
	}
	if hs, ok := cl.OptValue(kgo.WithHooks).([]kgo.Hook); ok {
		d.hooks = hs
	}
	if t, ok := cl.OptValue(kgo.DialTimeout).(time.Duration); ok && t > 0 {
		d.timeout = t
	}
	return d
}

// Dial connects to a broker: it dials, learns the broker's API versions
// and authenticates.
func (d Dialer) Dial(ctx context.Context, broker kgo.BrokerMetadata) (*Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	addr := net.JoinHostPort(broker.Host, strconv.Itoa(int(broker.Port)))
	start := time.Now()
	nc, err := d.dial(ctx, "tcp", addr)
	for _, h := range d.hooks {
		if h, ok := h.(kgo.HookBrokerConnect); ok {
			h.OnBrokerConnect(broker, time.Since(start), nc, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kafkawire: dial broker %d at %s: %w", broker.NodeID, addr, err)
	}
	c := newConn(nc, broker, d.hooks, d.clientID)
	if err := d.handshake(ctx, c); err != nil {
		c.Close()
		return nil, fmt.Errorf("kafkawire: broker %d at %s: %w", broker.NodeID, addr, err)
	}
	return c, nil
}

func (d Dialer) handshake(ctx context.Context, c *Conn) error {
	// Version 0 is the one every broker answers (later ones are flexible,
	// and a broker too old for them answers in version 0 anyway).
	av := kmsg.NewPtrApiVersionsRequest()
	resp, err := c.roundTrip(ctx, av, 0)
	if err != nil {
		return err
	}
	avr := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(avr.ErrorCode); err != nil {
		return fmt.Errorf("api versions: %w", err)
	}
	c.versions = map[int16][2]int16{}
	for _, k := range avr.ApiKeys {
		c.versions[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if len(d.sasls) > 0 {
		return d.authenticate(ctx, c)
	}
	return nil
}

// authenticate runs the client's SASL mechanism through SaslAuthenticate
// requests (KIP-152).
func (d Dialer) authenticate(ctx context.Context, c *Conn) error {
	authV, ok := c.Version(kmsg.SASLAuthenticate.Int16(), 2)
	if !ok {
		return errors.New("the broker does not take SaslAuthenticate requests")
	}
	// The first mechanism only, as kmirror configures one: a broker
	// closes the connection after refusing a handshake's mechanism.
	mech := d.sasls[0]
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = mech.Name()
	resp, err := c.roundTrip(ctx, hs, 1)
	if err != nil {
		return err
	}
	if hr := resp.(*kmsg.SASLHandshakeResponse); hr.ErrorCode != 0 {
		return fmt.Errorf("sasl handshake for %s (the broker enables %v): %w", mech.Name(), hr.SupportedMechanisms,
			kerr.ErrorForCode(hr.ErrorCode))
	}
	session, out, err := mech.Authenticate(ctx, c.broker.Host)
	if err != nil {
		return fmt.Errorf("sasl %s: %w", mech.Name(), err)
	}
	for {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.SASLAuthBytes = out
		resp, err := c.roundTrip(ctx, req, authV)
		if err != nil {
			return err
		}
		ar := resp.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(ar.ErrorCode); err != nil {
			if ar.ErrorMessage != nil {
				return fmt.Errorf("sasl %s: %w: %s", mech.Name(), err, *ar.ErrorMessage)
			}
			return fmt.Errorf("sasl %s: %w", mech.Name(), err)
		}
		if ar.SessionLifetimeMillis > 0 {
			// Renewed by a new connection a little before the broker
			// ends this one, as kgo reauthenticates at 95%.
			life := time.Duration(ar.SessionLifetimeMillis) * time.Millisecond
			c.renewAt = time.Now().Add(life * 9 / 10)
		}
		done, next, err := session.Challenge(ar.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("sasl %s: %w", mech.Name(), err)
		}
		if done {
			return nil
		}
		out = next
	}
}

// roundTrip sends a kmsg request at a version and reads its answer.
func (c *Conn) roundTrip(ctx context.Context, req kmsg.Request, version int16) (kmsg.Response, error) {
	req.SetVersion(version)
	resp := req.ResponseKind()
	resp.SetVersion(version)
	// ApiVersions answers with header version 0 whatever its version.
	flexibleAnswer := resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16()
	body, err := c.Do(ctx, Request{Key: req.Key(), Version: version, Flexible: req.IsFlexible(),
		FlexibleAnswer: flexibleAnswer, Body: net.Buffers{req.AppendTo(nil)}, Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("kafkawire: reading %s answer: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}
