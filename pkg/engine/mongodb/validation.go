package mongodb

import (
	"fmt"

	"example.com/database-apiserver/pkg/apis/example/validation"
)

// MaxVotingMembers is the most voting members a replica set may have
// (https://www.mongodb.com/docs/manual/reference/limits/#mongodb-limit-Number-of-Voting-Members-of-a-Replica-Set):
// the controller makes the members past it non-voting, with priority 0.
const MaxVotingMembers = 7

// ValidationRules warns of a replica set that elects its primary less safely than the user
// may think:
//   - an even number of voting members, which tolerates the loss of no more members than one
//     fewer would (2 members tolerate none): a majority elects the primary
//     (https://www.mongodb.com/docs/manual/core/replica-set-architectures/#consider-fault-tolerance);
//   - more than MaxVotingMembers, whose members past it neither vote nor become
//     primary.
func (Engine) ValidationRules() validation.EngineRules {
	return validation.EngineRules{ReplicaWarnings: func(n int32) []string {
		voters := min(n, MaxVotingMembers)
		var warnings []string
		if voters%2 == 0 {
			warnings = append(warnings, fmt.Sprintf("spec.replicas: a MongoDB replica set of %d voting members elects its primary by a majority of %d, "+
				"so it survives the loss of %d members, no more than %d would: use an odd number", voters, voters/2+1, (voters-1)/2, voters-1))
		}
		if n > MaxVotingMembers {
			warnings = append(warnings, fmt.Sprintf("spec.replicas: a MongoDB replica set has at most %d voting members: the other %d neither vote nor become primary",
				MaxVotingMembers, n-MaxVotingMembers))
		}
		return warnings
	}}
}
