// ternion-export: see training/export_cli.h.
#include "training/export_cli.h"

int main(int argc, char** argv) { return ternion::export_main(argc, argv); }
