package database

import (
	"fmt"

	"github.com/spf13/cobra"
)

// exactlyOneName accepts one argument, the Database's name, and says what is missing or extra
// otherwise.
func exactlyOneName(cmd *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("a Database name is required: %s", cmd.UseLine())
	}
	return fmt.Errorf("one Database name is expected, got %d arguments %q: %s", len(args), args, cmd.UseLine())
}
