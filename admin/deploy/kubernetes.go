package deploy

import (
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/cqlx"
	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/internal/cqlsession"
)

// kubernetesName is a Kubernetes object name (a DNS-1123 subdomain).
var kubernetesName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// checkKubernetesSecret checks a --kubernetes-secret name.
func checkKubernetesSecret(name string) error {
	if name != "" && !kubernetesName.MatchString(name) {
		return fmt.Errorf("--kubernetes-secret %q: want a Kubernetes name (lower-case letters, digits, - and .): %w", name, exitcode.ErrUsage)
	}
	return nil
}

// NewKubernetesSecretCommand returns `foldline kubernetes-secret`.
func NewKubernetesSecretCommand() *cobra.Command {
	var opts Options
	var namespace string
	cmd := &cobra.Command{
		Use:   "kubernetes-secret [DIR] --name NAME",
		Short: "Print the Kubernetes secret that holds a tenant's function credentials",
		Long: `Print, as a Kubernetes manifest, the secret that holds the credentials the tenant of
the manifests in DIR runs as (its Pulsar token, its sinks' Cassandra login), for
Pulsar's Kubernetes runtime: create it in the functions' namespace, then deploy with
--kubernetes-secret NAME, and each function's secrets refer to its keys instead of
holding the values. The output holds the credentials: pipe it to kubectl.`,
		Example: "  foldline kubernetes-secret --name foldline-shop --namespace pulsar-functions | kubectl apply -f -\n" +
			"  foldline deploy --kubernetes-secret foldline-shop",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := opts.Bind(cmd, args); err != nil {
				return err
			}
			if opts.KubernetesSecret == "" {
				return fmt.Errorf("--name is required: %w", exitcode.ErrUsage)
			}
			if err := checkKubernetesSecret(opts.KubernetesSecret); err != nil {
				return err
			}
			if namespace != "" && !kubernetesName.MatchString(namespace) {
				return fmt.Errorf("--namespace %q: want a Kubernetes name: %w", namespace, exitcode.ErrUsage)
			}
			set, err := opts.Target.Load(opts.Dir)
			if err != nil {
				return err
			}
			// The tenant name's generation is on the cluster.
			cql, err := cqlx.Connect(opts.Services)
			if err != nil {
				return err
			}
			defer cqlsession.Close(cql)
			id, err := tenantIdentity(cmd.Context(), opts.Services, cql, set.Tenant.Name)
			if err != nil {
				return err
			}
			return WriteKubernetesSecret(opts.Out, opts.KubernetesSecret, namespace, set.Tenant.Name, id.secretValues(true))
		},
	}
	opts.Target.Register(cmd.Flags())
	cmd.Flags().StringVar(&opts.KubernetesSecret, "name", "", "the secret's name")
	cmd.Flags().StringVar(&namespace, "namespace", "", "the secret's namespace (default: kubectl's)")
	return cmd
}

// WriteKubernetesSecret writes a Secret manifest of values.
func WriteKubernetesSecret(w io.Writer, name, namespace, tenant string, values map[string]string) error {
	if len(values) == 0 {
		return fmt.Errorf("tenant %s runs with no credentials (an open stack): no secret to make", tenant)
	}
	fmt.Fprintf(w, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n", name)
	if namespace != "" {
		fmt.Fprintf(w, "  namespace: %s\n", namespace)
	}
	fmt.Fprintf(w, "  labels:\n    app.kubernetes.io/managed-by: foldline\n    foldline.io/tenant: %s\ntype: Opaque\ndata:\n", tenant)
	for _, k := range slices.Sorted(maps.Keys(values)) {
		fmt.Fprintf(w, "  %s: %s\n", k, base64.StdEncoding.EncodeToString([]byte(values[k])))
	}
	return nil
}
