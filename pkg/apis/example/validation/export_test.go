package validation

import "example.com/database-apiserver/pkg/apis/example"

// EngineRulesOf returns the rules registered for engine, and whether any are: for tests that
// change an engine's rules for a while and put them back.
func EngineRulesOf(engine example.Engine) (EngineRules, bool) {
	engineRulesMu.RLock()
	defer engineRulesMu.RUnlock()
	rules, ok := engineRules[engine]
	return rules, ok
}
