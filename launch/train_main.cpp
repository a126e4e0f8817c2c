// ternion-train: see training/train_cli.h.
#include "training/train_cli.h"

int main(int argc, char** argv) { return ternion::train_main(argc, argv); }
