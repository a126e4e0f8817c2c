// ternion-plan: which tensor x pipeline x data layout, micro-batch size and interleaving to
// train a config with on a cluster, with each layout's predicted step time, throughput, MFU,
// memory per GPU, pipeline bubble and exposed communication (planner/step_model.h).
//
//   ternion-plan --config FILE --cluster FILE [--set S.K=V ...] [--top N]
//                [--layout T,P,D[,MB[,V]]] [--json] [--write-config FILE]
//
// Without --layout it ranks every layout that fits (planner/layout_search.h); with it, it
// explains that one term by term. --json prints a JSON array of objects instead of the table;
// --write-config writes the first (or the given) layout as a runnable config (atomically).
// Exit status 0; 1 for bad input (a config or cluster file, or no layout that fits, with the
// smallest need and its largest term); 2 for a bad command line.
#pragma once

namespace ternion {

int plan_main(int argc, char** argv);

}  // namespace ternion
