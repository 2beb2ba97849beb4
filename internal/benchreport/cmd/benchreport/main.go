// Command benchreport renders the figures Foldline's benchmarks appended to
// a JSON Lines file (see internal/benchreport) as one table on stdout and,
// with -json, as one JSON document. scripts/bench runs it at the end.
//
//	benchreport -in bench.jsonl -json bench.json -note "2 cores, shared"
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/foldline/foldline/internal/benchreport"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run() error {
	in := flag.String("in", os.Getenv(benchreport.EnvFile), "JSON Lines file of figures (default $"+benchreport.EnvFile+")")
	out := flag.String("json", "", "write the combined JSON document here")
	note := flag.String("note", "", "where the figures were measured, for the document")
	flag.Parse()
	if *in == "" {
		return fmt.Errorf("no figures file: pass -in or set %s", benchreport.EnvFile)
	}
	f, err := os.Open(*in)
	if err != nil {
		return fmt.Errorf("opening the figures: %w", err)
	}
	defer f.Close()
	figs, err := benchreport.Read(f)
	if err != nil {
		// Another benchmark's bad line must not hide everyone's figures.
		fmt.Fprintln(os.Stderr, "benchreport: skipped:", err)
	}
	doc := benchreport.NewDocument(figs, time.Now(), *note)
	if err := doc.WriteTable(os.Stdout); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	w, err := os.Create(*out)
	if err != nil {
		return fmt.Errorf("creating %s: %w", *out, err)
	}
	if err := doc.WriteJSON(w); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", *out, err)
	}
	return nil
}
