package localcluster

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// iptablesChainPrefixes are the chains the real node's components make: kube-proxy's and the
// kubelet's (KUBE-), the CNI plugins' (CNI-).
var iptablesChainPrefixes = []string{"KUBE-", "CNI-"}

// iptablesRuleset is what one `<family>-save` printed: the chains of each table and the
// rules, as written ("-A CHAIN ...").
type iptablesRuleset struct {
	chains map[string][]string // table -> chains
	rules  map[string][]string // table -> rules
}

// parseIptablesSave reads iptables-save output: "*table" starts a table, ":CHAIN POLICY
// [counters]" declares a chain, "-A CHAIN ..." is a rule, "COMMIT" ends the table.
func parseIptablesSave(out []byte) iptablesRuleset {
	rs := iptablesRuleset{chains: map[string][]string{}, rules: map[string][]string{}}
	table := ""
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":") && table != "":
			if f := strings.Fields(line[1:]); len(f) > 0 {
				rs.chains[table] = append(rs.chains[table], f[0])
			}
		case strings.HasPrefix(line, "-A ") && table != "":
			rs.rules[table] = append(rs.rules[table], line)
		}
	}
	return rs
}

// iptablesSnapshot returns, for iptables and ip6tables (those installed), the chains that
// exist now, so removeNewIptablesChains can tell ours apart later.
func iptablesSnapshot() map[string]map[string]bool {
	snap := map[string]map[string]bool{}
	for _, family := range []string{"iptables", "ip6tables"} {
		out, err := exec.Command(family + "-save").Output()
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		rs := parseIptablesSave(out)
		for table, chains := range rs.chains {
			for _, ch := range chains {
				seen[table+"/"+ch] = true
			}
		}
		snap[family] = seen
	}
	return snap
}

// removalScript is the iptables-restore --noflush input that removes, from rs, every chain
// with one of iptablesChainPrefixes that was not in before: first the rules elsewhere that
// jump to it, then its own rules, then the chain.
func removalScript(rs iptablesRuleset, before map[string]bool) string {
	var b strings.Builder
	for table, chains := range rs.chains {
		ours := map[string]bool{}
		for _, ch := range chains {
			for _, p := range iptablesChainPrefixes {
				if strings.HasPrefix(ch, p) && !before[table+"/"+ch] {
					ours[ch] = true
				}
			}
		}
		if len(ours) == 0 {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", table)
		for _, rule := range rs.rules[table] {
			f := strings.Fields(rule)
			if len(f) < 2 || ours[f[1]] {
				continue // flushed below
			}
			for i := 2; i+1 < len(f); i++ {
				if (f[i] == "-j" || f[i] == "-g") && ours[f[i+1]] {
					fmt.Fprintf(&b, "-D %s\n", strings.TrimPrefix(rule, "-A "))
					break
				}
			}
		}
		for _, ch := range chains {
			if ours[ch] {
				fmt.Fprintf(&b, "-F %s\n", ch)
			}
		}
		for _, ch := range chains {
			if ours[ch] {
				fmt.Fprintf(&b, "-X %s\n", ch)
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// removeNewIptablesChains removes the KUBE- and CNI- chains made since snap was taken (and
// the jumps to them), in every table of iptables and ip6tables.
func removeNewIptablesChains(snap map[string]map[string]bool) error {
	var errs []string
	for family, before := range snap {
		out, err := exec.Command(family + "-save").Output()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s-save: %v", family, err))
			continue
		}
		script := removalScript(parseIptablesSave(out), before)
		if script == "" {
			continue
		}
		cmd := exec.Command(family+"-restore", "--noflush")
		cmd.Stdin = strings.NewReader(script)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			errs = append(errs, fmt.Sprintf("%s-restore: %v: %s", family, err, strings.TrimSpace(stderr.String())))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
