package query

// Generator column names.
const (
	GeneratorEventID   = "event_id"
	GeneratorCourseID  = "course_id"
	GeneratorLessonID  = "lesson_id"
	GeneratorEventTime = "event_time"
)

// GeneratorSchema returns the fixed schema of the generator source's rows:
// event_id string not null, course_id string not null, lesson_id string,
// event_time timestamp not null. WithDefaults fills it in when
// source.generator is set and source.schema is empty.
func GeneratorSchema() []Field {
	notNull := func() *bool { b := false; return &b }
	return []Field{
		{Name: GeneratorEventID, Type: "string", Nullable: notNull()},
		{Name: GeneratorCourseID, Type: "string", Nullable: notNull()},
		{Name: GeneratorLessonID, Type: "string"},
		{Name: GeneratorEventTime, Type: "timestamp", Nullable: notNull()},
	}
}
