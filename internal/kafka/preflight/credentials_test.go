package preflight

import (
	"strings"
	"testing"
	"time"

	"kmirror/internal/kafka/kafkaconn"
	"kmirror/internal/testing/kfakeauth"
)

// TestCredentialsOAuth: a token endpoint that issues a token passes; a
// wrong client secret fails with the endpoint's answer.
func TestCredentialsOAuth(t *testing.T) {
	is := kfakeauth.NewIssuer(t, "kmirror", "secret", time.Hour)
	sec := kafkaconn.Security{Protocol: "SASL_SSL", SASLMechanism: "OAUTHBEARER",
		OAuth: kafkaconn.OAuthAuth{TokenEndpointURL: is.URL, ClientID: "kmirror", ClientSecret: "secret", Scope: "kafka"}}
	rows := Credentials(t.Context(), "source", []string{"broker:9093"}, sec)
	if len(rows) != 1 || rows[0].Check != "OAuth token" || rows[0].Status != Pass || !strings.Contains(rows[0].Detail, "valid for 1h0m0s") {
		t.Fatalf("rows %+v", rows)
	}
	if n := len(is.Issued()); n != 1 || is.Issued()[0].Scope != "kafka" {
		t.Fatalf("issued %+v", is.Issued())
	}
	sec.OAuth.ClientSecret = "wrong"
	rows = Credentials(t.Context(), "destination", nil, sec)
	if len(rows) != 1 || rows[0].Status != Fail || rows[0].Cluster != "destination" || !strings.Contains(rows[0].Detail, "invalid_client") {
		t.Fatalf("wrong secret: rows %+v", rows)
	}
	if rows := Credentials(t.Context(), "source", nil, kafkaconn.Security{SASLMechanism: "PLAIN"}); len(rows) != 0 {
		t.Fatalf("PLAIN: rows %+v", rows)
	}
}

// TestCredentialsAWS: static keys resolve; the signing region comes from
// MSK host names, or AWS_REGION for others, and fails with neither.
func TestCredentialsAWS(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	msk := []string{"b-1.demo.abc123.c2.kafka.eu-central-1.amazonaws.com:9098", "b-2.demo.abc123.c2.kafka.eu-central-1.amazonaws.com:9098"}
	sec := kafkaconn.Security{Protocol: "SASL_SSL", SASLMechanism: "AWS_MSK_IAM",
		AWS: kafkaconn.AWSAuth{AccessKeyID: "AKIATEST", SecretAccessKey: "s"}}
	rows := Credentials(t.Context(), "source", msk, sec)
	if len(rows) != 2 || rows[0].Status != Pass || !strings.Contains(rows[0].Detail, "AKIATEST") ||
		rows[1].Status != Pass || !strings.Contains(rows[1].Detail, "signed for eu-central-1") {
		t.Fatalf("MSK hosts: rows %+v", rows)
	}
	sec.AWS.Region = "us-east-1"
	if rows := Credentials(t.Context(), "source", msk, sec); rows[1].Status != Warn {
		t.Fatalf("another aws_region: %+v", rows[1])
	}
	if rows := Credentials(t.Context(), "source", []string{"127.0.0.1:9092"}, sec); rows[1].Status != Fail ||
		!strings.Contains(rows[1].Detail, "AWS_REGION is not set") {
		t.Fatalf("no region anywhere: %+v", rows[1])
	}
	t.Setenv("AWS_REGION", "ap-south-1")
	if rows := Credentials(t.Context(), "source", []string{"127.0.0.1:9092"}, sec); rows[1].Status != Pass ||
		!strings.Contains(rows[1].Detail, "ap-south-1") {
		t.Fatalf("AWS_REGION: %+v", rows[1])
	}
	sec.AWS = kafkaconn.AWSAuth{AccessKeyID: "AKIATEST"}
	if rows := Credentials(t.Context(), "source", msk, sec); rows[0].Status != Fail || !strings.Contains(rows[0].Detail, "aws_secret_access_key") {
		t.Fatalf("no secret: %+v", rows[0])
	}
}

// TestHostRegion: the region in MSK's broker names, provisioned, Serverless
// and VPC endpoints alike; none in other names.
func TestHostRegion(t *testing.T) {
	for host, want := range map[string]string{
		"b-1.demo.abc123.c2.kafka.eu-central-1.amazonaws.com:9098":          "eu-central-1",
		"boot-abcd1234.c1.kafka-serverless.us-east-1.amazonaws.com:9098":    "us-east-1",
		"b-1-public.demo.abc123.c2.kafka.ap-southeast-2.amazonaws.com:9198": "ap-southeast-2",
		"vpce-0a1b2c3d-e4f5.kafka.us-gov-west-1.vpce.amazonaws.com:14001":   "us-gov-west-1",
		"b-2.demo.abc123.c3.kafka.cn-north-1.amazonaws.com.cn:9098":         "cn-north-1",
		"kafka.example.com:9092":     "",
		"us-east-1.example.com:9092": "",
		"127.0.0.1:9092":             "",
	} {
		if got := hostRegion(host); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}
