package preflight

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"kmirror/internal/kafka/kafkaconn"
)

// Credentials checks what a cluster's SASL mechanism fetches before it can
// authenticate, apart from the cluster: an OAUTHBEARER token from the
// token endpoint, AWS credentials from their chain and the region to sign
// for. A connect row that fails after these pass points at the broker's
// side (the principal, its ACLs or policy) rather than at kmirror's. It
// returns no row for the other mechanisms, whose secrets go to the broker
// as they are.
func Credentials(ctx context.Context, cluster string, servers []string, sec kafkaconn.Security) []Result {
	switch strings.ToUpper(sec.SASLMechanism) {
	case kafkaconn.MechanismOAuthBearer:
		return []Result{oauthToken(ctx, cluster, sec.OAuth)}
	case kafkaconn.MechanismAWSMSKIAM:
		return []Result{awsCredentials(ctx, cluster, sec.AWS), awsSigningRegion(cluster, servers, sec.AWS)}
	}
	return nil
}

func oauthToken(ctx context.Context, cluster string, o kafkaconn.OAuthAuth) Result {
	const check = "OAuth token"
	if err := kafkaconn.CheckOAuth(o); err != nil {
		return Result{Cluster: cluster, Check: check, Status: Fail, Detail: err.Error(), Grant: "fix the OAUTHBEARER settings"}
	}
	tok, err := kafkaconn.NewOAuthTokens(o).Token(ctx)
	if err != nil {
		return Result{Cluster: cluster, Check: check, Status: Fail, Detail: err.Error(),
			Grant: "check the token endpoint URL, the client id and secret, and the scope with the identity provider"}
	}
	life := "no expiry given"
	if !tok.Expiry.IsZero() {
		life = "valid for " + time.Until(tok.Expiry).Round(time.Second).String()
	}
	return pass(cluster, check, fmt.Sprintf("%s issued a token to client %s (%s)", o.TokenEndpointURL, o.ClientID, life))
}

func awsCredentials(ctx context.Context, cluster string, a kafkaconn.AWSAuth) Result {
	const check = "AWS credentials"
	id, from, err := kafkaconn.ResolveAWSCredentials(ctx, a)
	if err != nil {
		return Result{Cluster: cluster, Check: check, Status: Fail, Detail: err.Error(),
			Grant: "give the server an AWS identity (an EKS service account role, an instance or task role, or " +
				"AWS_* variables), or set aws_access_key_id and aws_secret_access_key"}
	}
	return pass(cluster, check, fmt.Sprintf("access key id %s, from %s; its IAM policy needs kafka-cluster:Connect "+
		"and the topic and group actions on the cluster", id, from))
}

// reRegionLabel finds a region among a host name's labels, as franz-go's
// sasl/aws does for the name of an AWS endpoint.
var reRegionLabel = regexp.MustCompile(`^[a-z]{2,}(-[a-z0-9]+)+-[0-9]+$`)

func hostRegion(hostPort string) string {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if !strings.Contains(host, ".amazonaws.") && !strings.Contains(host, ".api.aws") {
		return ""
	}
	labels := strings.Split(host, ".")
	for i := len(labels) - 1; i >= 0; i-- {
		if reRegionLabel.MatchString(labels[i]) {
			return labels[i]
		}
	}
	return ""
}

// awsSigningRegion checks that franz-go finds a region to sign for: the
// one in each broker's host name, else AWS_REGION or AWS_DEFAULT_REGION.
func awsSigningRegion(cluster string, servers []string, a kafkaconn.AWSAuth) Result {
	const check = "AWS signing region"
	env := os.Getenv("AWS_REGION")
	if env == "" {
		env = os.Getenv("AWS_DEFAULT_REGION")
	}
	var regions, without []string
	for _, s := range servers {
		if r := hostRegion(s); r != "" {
			regions = append(regions, r)
		} else {
			without = append(without, s)
		}
	}
	switch {
	case len(without) > 0 && env == "":
		return Result{Cluster: cluster, Check: check, Status: Fail,
			Detail: fmt.Sprintf("%s carries no AWS region in its name, and AWS_REGION is not set: requests cannot be signed", names(without)),
			Grant:  "use the brokers' MSK host names (b-1.<cluster>.<id>.kafka.<region>.amazonaws.com), or set AWS_REGION for the server"}
	case len(without) > 0:
		return pass(cluster, check, fmt.Sprintf("%s carries no region in its name: signed for %s (AWS_REGION)", names(without), env))
	case a.Region != "" && regions[0] != a.Region:
		return Result{Cluster: cluster, Check: check, Status: Warn,
			Detail: fmt.Sprintf("signed for %s (the brokers' host names), but aws_region is %s", regions[0], a.Region),
			Grant:  "set aws_region to the cluster's region, or leave it empty"}
	}
	return pass(cluster, check, "signed for "+regions[0]+", the region in the brokers' host names")
}
