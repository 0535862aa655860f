"""Teachers (parts): the fine-tuned teacher, its cache, the teacher-output store and its plan, decoder teachers."""
