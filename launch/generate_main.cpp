// ternion-generate: see training/generate_cli.h.
#include "training/generate_cli.h"

int main(int argc, char** argv) { return ternion::generate_main(argc, argv); }
