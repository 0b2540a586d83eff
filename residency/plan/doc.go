// Package plan is the residency sidecar's pure core: the model catalog (Catalog, Model, Tier),
// the memory budget and its profile table (Budget, ProfileBytes), what one loop observed
// (Observed, ModelStatus with its work in flight, State), demand, and the planner itself:
//
//	Plan(catalog, budget, observed, demand, now) []Action
//
// with Decide (the plan plus its refusals and accounting), Apply (the observation after a plan
// has run), Accounted, and the value model: DecayedRate (LRFU-decayed demand), Worth and Value
// (GreedyDual-Size's cost ÷ size with the load time as cost), MinResidency (the anti-thrash
// rule, AntiThrashFactor × load time) and IdleTimeout. No context, logger, clock, goroutine or
// interface is inside, and the package imports the standard library and go-digest only, so
// that the replay simulator (cmd/replay) and tests link it without client-go, gRPC or the
// Triton client. Package residency parses catalog YAML into a Catalog (ParseCatalog) and runs
// the controller around Decide.
package plan
