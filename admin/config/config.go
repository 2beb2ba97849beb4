// Package config is `foldline config`: the named contexts of the config
// file (package services), as kubectl config shows and switches them —
// view prints every connection setting with where its value came from
// (flag, environment, context or default; secrets masked), get-contexts
// lists the contexts, current-context prints the one in use and
// use-context switches it.
package config

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/foldline/foldline/admin/internal/exitcode"
	"github.com/foldline/foldline/admin/internal/target"
	"github.com/foldline/foldline/internal/services"
)

// NewCommand returns `foldline config` and its verbs.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the connection settings and switch between named contexts",
		Long: `Foldline connects to one Pulsar and one Cassandra cluster. Each setting can be given
as a flag (--pulsar-url), an environment variable (FOLDLINE_PULSAR_URL) or in a
named context of the config file (pulsar.url), from the strongest to the weakest;
without any, Foldline connects to the local stack (scripts/stack up) with its
credentials. The local stack's credentials are never sent to other addresses.

The config file (--config, $FOLDLINE_CONFIG, default ~/.config/foldline/config.yaml):

  current-context: prod
  contexts:
    - name: prod
      pulsar:
        url: pulsar+ssl://broker.example.com:6651
        admin-url: https://broker.example.com:8443
        token-file: /etc/foldline/prod.token
        tls-trust-certs-file: /etc/foldline/ca.pem
      cassandra:
        hosts: [cassandra-1.example.com:9042, cassandra-2.example.com:9042]
        user: foldline
        password-file: /etc/foldline/cassandra.password
        tls-ca-file: /etc/foldline/ca.pem

Every key is a global flag's name without its section (pulsar-tls-trust-certs-file
is pulsar.tls-trust-certs-file); see foldline --help.`,
	}
	cmd.AddCommand(newView(), newGetContexts(), newCurrentContext(), newUseContext())
	return cmd
}

func newView() *cobra.Command {
	var flags target.Flags
	cmd := &cobra.Command{
		Use:     "view",
		Short:   "Print every connection setting, its value and where it came from",
		Example: "  foldline config view\n  foldline --context prod config view -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := flags.JSON()
			if err != nil {
				return err
			}
			svc, err := services.Load()
			if err != nil {
				return err
			}
			return View(cmd.OutOrStdout(), svc, asJSON)
		},
	}
	cmd.Flags().StringVarP(&flags.Output, "output", "o", "text", "output format: text or json")
	return cmd
}

// ViewResult is config view's -o json.
type ViewResult struct {
	Context    string                  `json:"context"`
	ConfigFile string                  `json:"configFile"`
	Settings   []services.SettingValue `json:"settings"`
}

// View prints svc's settings.
func View(w io.Writer, svc services.Services, asJSON bool) error {
	res := ViewResult{Context: svc.Context, ConfigFile: svc.ConfigFile, Settings: svc.Values()}
	if asJSON {
		return target.WriteJSON(w, res)
	}
	if res.Context != "" {
		fmt.Fprintf(w, "context %s (%s)\n\n", res.Context, res.ConfigFile)
	} else {
		fmt.Fprintf(w, "no context (config file: %s)\n\n", services.ConfigPath())
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tFROM")
	for _, v := range res.Settings {
		if v.Value == "" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Key, v.Value, v.Source)
	}
	return tw.Flush()
}

func newGetContexts() *cobra.Command {
	var flags target.Flags
	cmd := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts of the config file; * marks the one in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := flags.JSON()
			if err != nil {
				return err
			}
			file, err := readFile()
			if err != nil {
				return err
			}
			svc, err := services.Load()
			if err != nil {
				return err
			}
			return GetContexts(cmd.OutOrStdout(), file, svc.Context, asJSON)
		},
	}
	cmd.Flags().StringVarP(&flags.Output, "output", "o", "text", "output format: text or json")
	return cmd
}

// ContextRow is one line of get-contexts.
type ContextRow struct {
	Name      string `json:"name"`
	Current   bool   `json:"current"`
	Pulsar    string `json:"pulsar"`
	Cassandra string `json:"cassandra"`
}

// GetContexts lists file's contexts, marking inUse.
func GetContexts(w io.Writer, file *services.ConfigFile, inUse string, asJSON bool) error {
	rows := make([]ContextRow, 0, len(file.Contexts))
	for _, c := range file.Contexts {
		rows = append(rows, ContextRow{Name: c.Name, Current: c.Name == inUse,
			Pulsar: c.Values["pulsar.url"].Value, Cassandra: c.Values["cassandra.hosts"].Value})
	}
	if asJSON {
		return target.WriteJSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENT\tNAME\tPULSAR\tCASSANDRA")
	for _, r := range rows {
		mark := ""
		if r.Current {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, r.Name, orDefault(r.Pulsar), orDefault(r.Cassandra))
	}
	return tw.Flush()
}

func orDefault(v string) string {
	if v == "" {
		return "(default)"
	}
	return v
}

func newCurrentContext() *cobra.Command {
	return &cobra.Command{
		Use:   "current-context",
		Short: "Print the context in use (--context, $FOLDLINE_CONTEXT, else the file's current-context)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := services.Load()
			if err != nil {
				return err
			}
			if svc.Context == "" {
				return fmt.Errorf("no context is in use (the config file %s sets no current-context): %w", services.ConfigPath(), exitcode.ErrUsage)
			}
			fmt.Fprintln(cmd.OutOrStdout(), svc.Context)
			return nil
		},
	}
}

func newUseContext() *cobra.Command {
	return &cobra.Command{
		Use:     "use-context NAME",
		Short:   "Make NAME the config file's current context",
		Example: "  foldline config use-context prod",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := services.ConfigPath()
			if err := services.UseContext(path, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "switched to context %q (%s)\n", args[0], path)
			return nil
		},
	}
}

// readFile reads the config file, which get-contexts needs to exist
// (services.ErrConfig when it does not).
func readFile() (*services.ConfigFile, error) {
	return services.ReadConfigFile(services.ConfigPath())
}
