package refs

import (
	"errors"

	"github.com/corral-sched/corral/internal/api"
)

// numberID returns the id of the job or array numbered n: 404 when none
// is. It reads the store.
func (r *Resolver) numberID(n int64) (string, error) {
	id, found, err := r.storedNumber(n)
	if err != nil {
		return "", err
	}
	if !found {
		return "", api.NotFound("no job number %d", n)
	}
	return id, nil
}

// Ref resolves what a person typed for a job to the job's id, or to an
// array's id (array true): a number, a task (NUMBER_INDEX or
// PREFIX_INDEX), an id or a unique prefix of one (ArrayID, JobID), else
// a name that names exactly one of user's jobs and arrays (several: 409
// ambiguous_id, listing their numbers).
//
// 404 when it names nothing. A prefix that arrays' and jobs' ids share is
// answered as by ArrayID (409 on array_id).
func (r *Resolver) Ref(ref, user string) (id string, array bool, err error) {
	return r.ref(ref, user, true)
}

// ref is Ref; arrayErrs says which error an ambiguous prefix gets: the
// array's (true) or the job's.
func (r *Resolver) ref(ref, user string, arrayErrs bool) (id string, array bool, err error) {
	if n, task, ok := ParseNumber(ref); ok {
		id, err := r.numberID(n)
		if err != nil {
			return "", false, err
		}
		if task != "" {
			id, err = r.JobID(id + "_" + task)
			if errors.Is(err, api.ErrNotFound) {
				return "", false, api.NotFound("no job %s (job %d has no task %s)", ref, n, task)
			}
			return id, false, err
		}
		return r.idOrArray(id, arrayErrs)
	}
	if prefix, task, ok := cutTask(ref); ok {
		if aid, found, err := r.arrayOnlyPrefix(prefix); err != nil || found {
			if err != nil {
				return "", false, err
			}
			id, err := r.JobID(aid + "_" + task)
			return id, false, err
		}
	}
	id, array, err = r.idOrArray(ref, arrayErrs)
	if err == nil || user == "" || !notFound(err) {
		return id, array, err
	}
	named, nerr := r.named(ref, user)
	switch {
	case nerr != nil:
		r.log.Warn("resolve a job's name", "name", ref, "err", nerr)
		return "", false, err
	case len(named) == 0:
		return "", false, err
	case len(named) == 1:
		return named[0].ID, named[0].Array, nil
	}
	return "", false, ambiguousName(ref, named)
}

// JobRef is Ref for a route that takes a job: an array is a 404
// is_array.
func (r *Resolver) JobRef(ref, user string) (string, error) {
	id, array, err := r.ref(ref, user, false)
	if err == nil && array {
		return "", isArray(id)
	}
	return id, err
}

// ArrayRef is Ref for a route that takes an array: a job is a 404.
func (r *Resolver) ArrayRef(ref, user string) (string, error) {
	id, array, err := r.Ref(ref, user)
	if err == nil && !array {
		return "", api.NotFound("no job array %q", ref)
	}
	return id, err
}

// idOrArray resolves an id or a prefix, to an array first (an array's id
// is a prefix of its tasks'), then to a job; when neither resolves, the
// error is the array's when arrayErrs is set (as ArrayID answers), else
// the job's (as JobID answers).
func (r *Resolver) idOrArray(ref string, arrayErrs bool) (string, bool, error) {
	aid, _, found, aerr := r.Array(ref)
	if aerr == nil && found {
		return aid, true, nil
	}
	id, err := r.JobID(ref)
	if err != nil && aerr != nil && arrayErrs {
		return "", false, aerr
	}
	return id, false, err
}

// notFound reports whether err is a plain 404 (not is_array).
func notFound(err error) bool {
	var ae *api.Error
	return errors.Is(err, api.ErrNotFound) && !(errors.As(err, &ae) && ae.Code == "is_array")
}
