// Command declared is the transformation of every view declared in YAML
// (a view manifest's from section), deployed by foldline deploy with the
// view's spec in its user config (declared.UserConfigSpec).
package main

import (
	"fmt"
	"os"

	"github.com/foldline/foldline/functions/declared"
	"github.com/foldline/foldline/functions/pf"
	"github.com/foldline/foldline/functions/transform/run"
)

func main() {
	program, err := readProgram(os.Args[1:])
	if err != nil {
		// The instance does not run, and functions status says why,
		// rather than running on and dead-lettering every event.
		pf.Refuse(fmt.Errorf("declared view: %w", err))
	}
	run.Main(program.Transformation())
}

// readProgram reads the spec from the instance config on the command line
// (args without the program name).
func readProgram(args []string) (*declared.Program, error) {
	uc, err := pf.UserConfig(args)
	if err != nil {
		return nil, err
	}
	return declared.FromUserConfig(uc)
}
