// ternion-plan: see planner/plan_cli.h.
#include "planner/plan_cli.h"

int main(int argc, char** argv) { return ternion::plan_main(argc, argv); }
