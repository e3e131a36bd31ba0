package kfakeauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// AWSMechanism is Amazon MSK's IAM mechanism.
const AWSMechanism = "AWS_MSK_IAM"

// AWSKey is a key the fake MSK accepts.
type AWSKey struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// AWSVerifier checks an AWS_MSK_IAM payload as MSK would: the JSON of a
// presigned kafka-cluster:Connect request for host in region, signed
// (SigV4) within the last five minutes by one of keys. It recomputes the
// signature with the AWS SDK's own signer, not franz-go's code, and
// returns the access key id as the principal.
func AWSVerifier(host, region string, keys ...AWSKey) Verifier {
	return func(auth []byte) (string, error) {
		var p map[string]string
		if err := json.Unmarshal(auth, &p); err != nil {
			return "", fmt.Errorf("not MSK IAM JSON: %w", err)
		}
		for k, want := range map[string]string{"version": "2020_10_22", "host": host, "action": "kafka-cluster:Connect",
			"x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-signedheaders": "host", "x-amz-expires": "900"} {
			if p[k] != want {
				return "", fmt.Errorf("%s is %q, want %q", k, p[k], want)
			}
		}
		cred := strings.Split(p["x-amz-credential"], "/")
		if len(cred) != 5 || cred[2] != region || cred[3] != "kafka-cluster" || cred[4] != "aws4_request" {
			return "", fmt.Errorf("credential scope %q is not <key>/<date>/%s/kafka-cluster/aws4_request", p["x-amz-credential"], region)
		}
		var key *AWSKey
		for i := range keys {
			if keys[i].AccessKeyID == cred[0] {
				key = &keys[i]
			}
		}
		if key == nil {
			return "", fmt.Errorf("unknown access key id %q", cred[0])
		}
		if p["x-amz-security-token"] != key.SessionToken {
			return "", errors.New("wrong session token")
		}
		at, err := time.Parse("20060102T150405Z", p["x-amz-date"])
		if err != nil || time.Since(at).Abs() > 5*time.Minute || cred[1] != at.Format("20060102") {
			return "", fmt.Errorf("x-amz-date %q is not now", p["x-amz-date"])
		}
		want, err := presignedSignature(host, region, *key, at)
		if err != nil {
			return "", err
		}
		if p["x-amz-signature"] != want {
			return "", errors.New("signature does not match")
		}
		return cred[0], nil
	}
}

// presignedSignature presigns the connect request with the SDK's signer.
func presignedSignature(host, region string, key AWSKey, at time.Time) (string, error) {
	q := url.Values{"Action": {"kafka-cluster:Connect"}, "X-Amz-Expires": {"900"}}
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	const emptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: key.AccessKeyID,
		SecretAccessKey: key.SecretAccessKey, SessionToken: key.SessionToken}, req, emptyHash, "kafka-cluster", region, at)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(signed)
	if err != nil {
		return "", err
	}
	return u.Query().Get("X-Amz-Signature"), nil
}
