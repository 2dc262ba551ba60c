"""The run behind ``musictx-generate`` and the app: its options (`generate_options.GenerateOptions`), the
model it picks (`model_choice`), a folder of seeds (`seed_folder`), progress bars (`progress`) and the output
folder it writes (`output_folder`); `continue_midi.run` ties them to a task (`musictx.tasks`)."""
